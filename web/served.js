// The note for a page opened as a file (index.html) goes at once where the page was served,
// before its larger scripts arrive. Chromium runs no module of a file: page; a browser that
// does would still fail to fetch the engine there, so the note stays.
if (location.protocol !== 'file:') document.getElementById('needs-server')?.remove();
