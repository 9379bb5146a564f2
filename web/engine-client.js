// The page's side of the engine worker: each call is a promise; progress messages go to the
// caller's callback.
export class EngineClient {
  constructor() {
    this.worker = new Worker(new URL('./engine-worker.js', import.meta.url), { type: 'module' });
    this.pending = new Map();
    this.nextId = 1;
    this.worker.onmessage = ({ data }) => {
      const call = this.pending.get(data.id);
      if (!call) return;
      if ('progress' in data) return call.onProgress?.(data.progress);
      this.pending.delete(data.id);
      if ('error' in data) call.reject(Object.assign(new Error(data.error), { code: data.code }));
      else call.resolve(data.result);
    };
    this.worker.onerror = (e) => {
      // A worker that failed to start (or crashed): fail every pending call with the reason.
      const error = Object.assign(new Error(e.message || 'the engine worker stopped'), { code: 'worker_stopped' });
      for (const call of this.pending.values()) call.reject(error);
      this.pending.clear();
    };
  }

  call(cmd, args = {}, onProgress = null) {
    const id = this.nextId++;
    return new Promise((resolve, reject) => {
      this.pending.set(id, { resolve, reject, onProgress });
      this.worker.postMessage({ id, cmd, args });
    });
  }
}
