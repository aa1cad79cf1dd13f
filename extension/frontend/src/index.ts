/**
 * ipyagent-bridge: the JupyterLab 4 / Notebook 7 end of the `ipyagent` comm (docs/protocol.md).
 *
 * For every notebook and every kernel connection it gets (first start, restart, kernel change,
 * page reload), a `DocumentBridge` (bridge/documentBridge.ts):
 *  - registers the comm target `ipyagent`, answers `hello` with `hello_ack`, applies `entries`
 *    messages to `metadata["ipyagent"]` idempotently by entry id and acks them;
 *  - when the notebook's metadata holds sessions, pushes them into the kernel with one silent
 *    execute request, queued before any user cell;
 *  - lifts journal outputs (`application/vnd.ipyagent.entries+json`) into the metadata, on open
 *    and when one is displayed, without touching the outputs;
 *  - answers the `notebook` tool's requests: `insert_cell` (a new cell below the running one,
 *    acked with its id) and `read_cells` (the cells with their outputs as text).
 *
 * Only `INotebookTracker` is required, which both JupyterLab and Notebook 7 provide.
 */

import { JupyterFrontEnd, JupyterFrontEndPlugin } from '@jupyterlab/application';
import { INotebookTracker, NotebookPanel } from '@jupyterlab/notebook';

// eslint-disable-next-line jupyter/prefer-lazy-imports -- activation attaches to the open notebooks at once
import { DocumentBridge } from './bridge/documentBridge';
import { LOG } from './bridge/notices';
import { RendererWarmup } from './bridge/renderer';

const plugin: JupyterFrontEndPlugin<void> = {
  id: 'ipyagent-bridge:plugin',
  description:
    "Stores ipyagent's session entries in the notebook metadata and pushes them back into the kernel after a restart.",
  autoStart: true,
  requires: [INotebookTracker],
  activate: (app: JupyterFrontEnd, tracker: INotebookTracker) => {
    const frontend = /notebook/i.test(app.name) ? 'notebook' : 'jupyterlab';
    const warmup = new RendererWarmup();
    const bridges = new WeakMap<object, DocumentBridge>();
    const attach = (panel: NotebookPanel) => {
      // Two views of one notebook share its context (and model): one bridge per context.
      const key = panel.context;
      if (bridges.has(key)) {
        return;
      }
      bridges.set(key, new DocumentBridge(panel, frontend, warmup));
    };
    tracker.forEach(attach);
    tracker.widgetAdded.connect((_, panel) => attach(panel));
    console.debug(LOG, `active (${frontend})`);
  }
};

export default plugin;
