// The page's side of the engine worker: each call is a promise; progress messages go to the
// caller's callback.
export class EngineClient {
  constructor() {
    this.worker = new Worker(new URL('./engine-worker.js', import.meta.url), { type: 'module' });
    this.pending = new Map();
    this.nextId = 1;
    this.queue = Promise.resolve();
    this.worker.onmessage = ({ data }) => {
      const call = this.pending.get(data.id);
      if (!call) return;
      if ('progress' in data) return call.onProgress?.(data.progress);
      this.pending.delete(data.id);
      if ('error' in data) call.reject(Object.assign(new Error(data.error), { code: data.code, details: data.details }));
      else call.resolve(data.result);
    };
    this.worker.onerror = (e) => {
      // A worker that failed to start (or crashed): fail every pending call with the reason.
      const error = Object.assign(new Error(e.message || 'the engine worker stopped'), { code: 'worker_stopped' });
      for (const call of this.pending.values()) call.reject(error);
      this.pending.clear();
    };
  }

  /**
   * Sends a command. Engine commands wait for the ones before them (the engine runs one at a
   * time), so any number of calls at once are answered in order; `cancel`, `caches` and
   * `memory` go at once (cancel must reach the running call).
   */
  call(cmd, args = {}, onProgress = null) {
    if (IMMEDIATE.has(cmd)) return this.send(cmd, args, onProgress);
    const run = this.queue.then(() => this.send(cmd, args, onProgress));
    this.queue = run.catch(() => {});
    return run;
  }

  send(cmd, args, onProgress) {
    const id = this.nextId++;
    return new Promise((resolve, reject) => {
      this.pending.set(id, { resolve, reject, onProgress });
      this.worker.postMessage({ id, cmd, args });
    });
  }
}

const IMMEDIATE = new Set(['cancel', 'caches', 'clearCaches', 'memory']);
