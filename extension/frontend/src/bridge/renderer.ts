/**
 * Warming JupyterLab's HTML renderer once per page, while the page is idle: the first output of
 * an agent turn otherwise pays JupyterLab's one-off costs (loading the sanitiser's and the math
 * typesetter's code, starting the typesetter) inside the turn, as a main-thread task of
 * 50–100 ms (tests/benchmarks/long_notebook.py).
 */

import type { NotebookPanel } from '@jupyterlab/notebook';

/** The page's renderers (the notebook panel's registry). */
type Rendermime = NotebookPanel['content']['rendermime'];

/** One per page (the plugin makes it): the first call warms the renderer, later ones nothing. */
export class RendererWarmup {
  private warmed = false;

  /** Render one small HTML output off-screen while the page is idle (once per page). */
  warm(rendermime: Rendermime): void {
    if (this.warmed) {
      return;
    }
    this.warmed = true;
    const idle = (window as { requestIdleCallback?: (f: () => void) => void }).requestIdleCallback;
    const later = idle ? (f: () => void) => idle.call(window, f) : (f: () => void) => setTimeout(f, 500);
    later(() => {
      const renderer = rendermime.createRenderer('text/html');
      const model = rendermime.createModel({ data: { 'text/html': '<p>ipyagent</p>' }, trusted: false });
      renderer.renderModel(model).then(
        () => renderer.dispose(),
        () => renderer.dispose()
      );
      // an output off-screen is not typeset: start the typesetter on its own
      const node = document.createElement('div');
      // eslint-disable-next-line jupyter/no-untranslated-string -- an off-screen node, never shown
      node.textContent = 'ipyagent';
      void Promise.resolve(rendermime.latexTypesetter?.typeset(node)).catch(() => undefined);
    });
  }
}
