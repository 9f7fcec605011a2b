// What the listener serves for the status page: the document, its script, and uPlot from the
// installed package (no CDN: the page works where the operator's browser reaches only this port).
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { CLIENT_SCRIPT } from './client-script.js';
import { PAGE_HTML } from './page-html.js';

export interface PageAsset {
  readonly contentType: string;
  readonly body: string | Buffer;
}

const require = createRequire(import.meta.url);
let uplot: { js: Buffer; css: Buffer } | null = null;

function uplotFiles(): { js: Buffer; css: Buffer } {
  uplot ??= { js: readFileSync(require.resolve('uplot/dist/uPlot.iife.min.js')), css: readFileSync(require.resolve('uplot/dist/uPlot.min.css')) };
  return uplot;
}

/** The asset at `path` (`/`, `/status-page.js`, `/uplot.min.js`, `/uplot.min.css`), or null. */
export function statusPageAsset(path: string): PageAsset | null {
  switch (path) {
    case '/':
    case '/index.html':
      return { contentType: 'text/html; charset=utf-8', body: PAGE_HTML };
    case '/status-page.js':
      return { contentType: 'text/javascript; charset=utf-8', body: CLIENT_SCRIPT };
    case '/uplot.min.js':
      return { contentType: 'text/javascript; charset=utf-8', body: uplotFiles().js };
    case '/uplot.min.css':
      return { contentType: 'text/css; charset=utf-8', body: uplotFiles().css };
    default:
      return null;
  }
}
