// Runs only where the page was served: browsers run no module of a page opened as a file. The
// note for that case (index.html) goes at once, before the page's larger scripts arrive.
document.getElementById('needs-server')?.remove();
