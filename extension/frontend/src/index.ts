/**
 * ipyagent-bridge: the JupyterLab 4 / Notebook 7 end of the `ipyagent` comm (docs/protocol.md).
 *
 * For every notebook and every kernel connection it gets (first start, restart, kernel change,
 * page reload):
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
import { Notification } from '@jupyterlab/apputils';
import type { ICellModel, ICodeCellModel } from '@jupyterlab/cells';
import { INotebookModel, INotebookTracker, NotebookPanel } from '@jupyterlab/notebook';
import { Kernel, KernelMessage } from '@jupyterlab/services';

import type { CellText, Entries, InsertCell, ReadCells, ToKernel } from './protocol';
import {
  ChunkedStore,
  FEATURES,
  IMetadataAccess,
  JOURNAL_MIME,
  LAYOUT_TEXT,
  METADATA_KEY,
  PROTOCOL,
  chunkNumber,
  hasSessions,
  insertPosition,
  isObject,
  outputsText,
  pushCodes,
  readMessage,
  updateFromJournal
} from './store';

const TARGET = 'ipyagent';
const LOG = '[ipyagent-bridge]';

/** What JupyterLab 4.6 added to a kernel connection (so: absent before it). */
type SubshellFields = { supportsSubshells?: boolean; commsOverSubshells?: string };

/** Whether this connection sends comm messages over a kernel subshell (JupyterLab 4.6+). */
function commsOverSubshells(kernel: SubshellFields): boolean {
  return (
    kernel.supportsSubshells === true &&
    kernel.commsOverSubshells !== undefined &&
    kernel.commsOverSubshells !== 'disabled'
  );
}

/** How long a comm's first message waits for the comm's subshell before going to the main shell. */
const SUBSHELL_WAIT_MS = 10000;

/** Per comm: resolves once its messages can go over its subshell (or never will). */
const subshellReady = new WeakMap<Kernel.IComm, Promise<void>>();

/**
 * JupyterLab 4.6+ gives each comm target a kernel subshell, but a comm opened by the kernel gets
 * its subshell id only once the subshell is created; a message sent before goes to the main
 * shell, which a Run All keeps busy until every queued cell has run (the handshake of
 * `%load_ext` would wait for all of them). So a comm's messages wait for its subshell.
 */
function waitForSubshell(comm: Kernel.IComm, kernel: Kernel.IKernelConnection): void {
  const started = (comm as { subshellStarted?: Promise<void> }).subshellStarted;
  if (!commsOverSubshells(kernel) || !started) {
    return;
  }
  const timeout = new Promise<void>(resolve => setTimeout(resolve, SUBSHELL_WAIT_MS));
  subshellReady.set(comm, Promise.race([started.catch(() => undefined), timeout]));
}

/** Every message to the kernel goes through here, so it is one of the protocol's. Messages of one
 * comm keep their order: each waits on the same promise. */
function send(comm: Kernel.IComm, message: ToKernel): void {
  const ready = subshellReady.get(comm);
  if (!ready) {
    comm.send(message);
    return;
  }
  void ready.then(() => {
    if (!comm.isDisposed) {
      comm.send(message);
    }
  });
}

function isCode(cell: ICellModel): cell is ICodeCellModel {
  return cell.type === 'code';
}

/** The IOPub messages with a mime bundle (where a journal output can be). A guard of our own:
 * `KernelMessage.isDisplayDataMsg` and its kin would make @jupyterlab/services a runtime import. */
function hasData(
  msg: KernelMessage.IIOPubMessage
): msg is KernelMessage.IDisplayDataMsg | KernelMessage.IUpdateDisplayDataMsg | KernelMessage.IExecuteResultMsg {
  const type = msg.header.msg_type;
  return type === 'display_data' || type === 'update_display_data' || type === 'execute_result';
}

/** The notebook model's metadata, one key at a time: the keys come from the shared document's
 * metadata map without copying any value (`model.metadata` would copy all of them). */
function metadataAccess(model: INotebookModel): IMetadataAccess {
  type Shared = { ymeta?: { get(key: string): unknown } };
  return {
    keys: () => {
      const ymetadata = (model.sharedModel as unknown as Shared).ymeta?.get('metadata') as
        | { keys(): Iterable<string> }
        | undefined;
      return ymetadata && typeof ymetadata.keys === 'function' ? ymetadata.keys() : Object.keys(model.metadata);
    },
    get: key => model.getMetadata(key),
    set: (key, value) => model.setMetadata(key, value)
  };
}

/** Whether this page has warmed JupyterLab's HTML renderer (`DocumentBridge.warmRenderer`). */
let warmed = false;

/** Everything the bridge keeps for one open document (shared by all views of it). */
class DocumentBridge {
  constructor(
    private readonly panel: NotebookPanel,
    private readonly frontend: string
  ) {
    const sc = panel.sessionContext;
    sc.kernelChanged.connect((_, args) => this.onKernel(args.newValue, 'kernel'), this);
    sc.statusChanged.connect((_, status) => this.onStatus(status), this);
    if (sc.session?.kernel) {
      this.onKernel(sc.session.kernel, 'kernel');
    }
    void panel.context.ready.then(() => {
      panel.context.model.metadataChanged.connect((_, change) => this.onMetadataChanged(change), this);
      this.liftJournals();
      this.scheduleMove();
    });
    // a rename (and the rename of a new notebook on its first save): the kernel follows the path
    panel.context.pathChanged.connect((_, path) => this.onPathChanged(path), this);
  }

  /** The comms that said hello on this document's kernels, each told of a new path. */
  private readonly comms = new Set<Kernel.IComm>();

  private onPathChanged(path: string): void {
    for (const comm of [...this.comms]) {
      if (comm.isDisposed) {
        this.comms.delete(comm);
      } else {
        send(comm, { type: 'path', path });
      }
    }
  }

  /** A problem of the store, said once per page (a console warning and a notification). */
  private warnOnce(text: string): void {
    if (this.said.has(text)) {
      return;
    }
    this.said.add(text);
    console.warn(LOG, text);
    Notification.warning(text, { autoClose: false });
  }

  private readonly said = new Set<string>();

  /**
   * A notebook in layout 1 moves into layout 3 while the page is idle, a chunk at a time
   * (`ChunkedStore.migrateStep`): no turn pays for rewriting a long session (one 276 ms task and
   * 5.7 MB into the shared document for 5,000 entries, when the first turn did it), and a step
   * is one chunk's text. Under collaboration one page moves it (the one that stores messages no
   * page asked for). Said once, when done; the notebook is in layout 3 on disk from its next save.
   */
  private scheduleMove(): void {
    if (this.moving) {
      return;
    }
    this.moving = true;
    const idle = (window as { requestIdleCallback?: (f: () => void, o?: { timeout: number }) => void })
      .requestIdleCallback;
    const later = idle ? (f: () => void) => idle.call(window, f, { timeout: 2000 }) : (f: () => void) => setTimeout(f, 50);
    let started = false;
    let steps = 0;
    let longest = 0;
    const step = () => {
      const store = this.store;
      if (!store || this.panel.isDisposed || !this.writesFor(null)) {
        this.moving = false;
        return;
      }
      const since = performance.now();
      let result: 'none' | 'more' | 'done';
      try {
        result = store.migrateStep();
      } catch (e) {
        this.moving = false;
        console.warn(LOG, 'moving the sessions into layout 3 failed; the first write does it', e);
        return;
      }
      steps += 1;
      longest = Math.max(longest, performance.now() - since);
      if (result === 'more') {
        if (!started) {
          started = true;
          console.debug(LOG, `moving the sessions into layout ${LAYOUT_TEXT} while the page is idle`, { since });
        }
        later(step);
        return;
      }
      this.moving = false;
      if (result === 'done' && store.moved) {
        const { entries, chunks } = store.moved;
        const text =
          `ipyagent: this notebook's agent sessions were moved to the current layout (layout ${LAYOUT_TEXT}: ` +
          `${entries} entries in ${chunks} chunks), a chunk at a time while the page was idle; ` +
          'the next save writes it.';
        console.info(LOG, text);
        console.debug(LOG, 'the move into layout 3 took', { steps, longest });
        Notification.info(text, { autoClose: 8000 });
      }
    };
    later(step);
  }

  private moving = false;

  /** The session store over this document's metadata (layout 2: chunks under their own keys). */
  private get store(): ChunkedStore | null {
    const model = this.model;
    if (!model) {
      return null;
    }
    if (!this._store || this._storeModel !== model) {
      this._storeModel = model;
      this._store = new ChunkedStore(metadataAccess(model), text => this.warnOnce(text));
    }
    return this._store;
  }

  /** Chunks written by another page (collaboration) are held at once; anything else touching
   * our keys (a reload from disk, a deletion, a rewrite) makes the store read them again. */
  private onMetadataChanged(change: { key: string; type: string; newValue?: unknown }): void {
    const store = this._store;
    if (!store) {
      return;
    }
    if (chunkNumber(change.key) !== null && change.type === 'add') {
      store.noteChunk(change.key, change.newValue);
    } else if (change.key === METADATA_KEY && change.type === 'change') {
      store.noteIndex(change.newValue);
    } else if (chunkNumber(change.key) !== null || (change.key === METADATA_KEY && change.type !== 'change')) {
      store.invalidate();
    }
  }

  private get model(): INotebookModel | null {
    return this.panel.context.model ?? null;
  }

  // ---- kernel connections -----------------------------------------------------------------

  private onKernel(kernel: Kernel.IKernelConnection | null, why: string): void {
    if (!kernel) {
      return;
    }
    this.registerTarget(kernel);
    void this.panel.context.ready.then(() => this.announce());
    if (!this.watched.has(kernel)) {
      this.watched.add(kernel);
      kernel.iopubMessage.connect((_, msg) => this.onIopub(msg), this);
    }
    this.schedulePush(kernel, why);
  }

  private onStatus(status: Kernel.Status): void {
    const kernel = this.panel.sessionContext.session?.kernel ?? null;
    if (!kernel) {
      return;
    }
    if (status === 'restarting') {
      // `restart()` emits 'restarting' and then clears the connection's queue; an auto-restart
      // clears it in a microtask scheduled before this signal. Queue the push after both, so it
      // waits in the pending queue of the new kernel, ahead of any user cell.
      this.registerTarget(kernel);
      this.schedulePush(kernel, 'restart');
    } else if (status === 'starting') {
      this.registerTarget(kernel);
    }
  }

  private registerTarget(kernel: Kernel.IKernelConnection): void {
    // Idempotent: one callback per target name per connection; survives restarts, but
    // registering again after one costs nothing.
    kernel.registerCommTarget(TARGET, (comm, msg) => this.onCommOpen(kernel, comm, msg));
  }

  // ---- the comm ---------------------------------------------------------------------------

  private onCommOpen(
    kernel: Kernel.IKernelConnection,
    comm: Kernel.IComm,
    msg: KernelMessage.ICommOpenMsg
  ): void {
    comm.onMsg = (m: KernelMessage.ICommMsgMsg) => this.onCommMsg(comm, m);
    waitForSubshell(comm, kernel);
    if (readMessage(msg.content.data)?.type === 'hello') {
      this.comms.add(comm);
      send(comm, {
        type: 'hello_ack',
        protocol: PROTOCOL,
        frontend: this.frontend,
        path: this.panel.context.path ?? null,
        features: FEATURES,
        // our later comm messages reach the kernel while a cell runs (JupyterLab 4.6+ sends them
        // over a kernel subshell when the kernel has subshells)
        subshells: commsOverSubshells(kernel)
      });
      this.warmRenderer();
    }
  }

  /** Render one small HTML output off-screen while the page is idle, once per page: the first
   * output of an agent turn otherwise pays JupyterLab's one-off costs (loading the sanitiser's
   * and the math typesetter's code, starting the typesetter) inside the turn, as a main-thread
   * task of 50–100 ms (tests/benchmarks/long_notebook.py). */
  private warmRenderer(): void {
    if (warmed) {
      return;
    }
    warmed = true;
    const idle = (window as { requestIdleCallback?: (f: () => void) => void }).requestIdleCallback;
    const later = idle ? (f: () => void) => idle.call(window, f) : (f: () => void) => setTimeout(f, 500);
    later(() => {
      const rendermime = this.panel.content.rendermime;
      const renderer = rendermime.createRenderer('text/html');
      const model = rendermime.createModel({ data: { 'text/html': '<p>ipyagent</p>' }, trusted: false });
      renderer.renderModel(model).then(
        () => renderer.dispose(),
        () => renderer.dispose()
      );
      // an output off-screen is not typeset: start the typesetter on its own
      const node = document.createElement('div');
      node.textContent = 'ipyagent';
      void Promise.resolve(rendermime.latexTypesetter?.typeset(node)).catch(() => undefined);
    });
  }

  private onCommMsg(comm: Kernel.IComm, msg: KernelMessage.ICommMsgMsg): void {
    const message = readMessage(msg.content.data);
    switch (message?.type) {
      case 'entries':
        this.onEntries(comm, message, msg);
        break;
      case 'insert_cell':
        this.onInsertCell(comm, message);
        break;
      case 'read_cells':
        this.onReadCells(comm, message.seq);
        break;
      case 'invalid':
        if (message.of === 'insert_cell') {
          send(comm, { type: 'insert_cell_ack', seq: message.seq, error: 'not a valid insert_cell request' });
        }
        break;
    }
  }

  private onEntries(comm: Kernel.IComm, update: Entries, msg: KernelMessage.ICommMsgMsg): void {
    const store = this.store;
    if (!store || !this.writesFor(msg)) {
      return;
    }
    const result = store.apply(update);
    send(comm, {
      type: 'ack',
      seq: update.seq,
      session: update.session,
      stored: result.stored,
      ids: result.ids
    });
  }

  // ---- one writer per message under collaboration ---------------------------------------------

  /**
   * With real-time collaboration every page of the notebook gets the kernel's messages, and all
   * of them write into one shared document: exactly one page stores (and acks) each message. It
   * is the page whose kernel connection sent the request the message answers (its parent header's
   * session is that connection's client id, which each page announces in its awareness state);
   * for a message no page asked for (a resend after a push, a message from a kernel thread) the
   * page with the smallest awareness client id among those running this bridge. Without
   * collaboration each page has a model of its own, and each stores every message.
   */
  private writesFor(msg: KernelMessage.IMessage | null): boolean {
    const model = this.model;
    if (!model || !model.collaborative) {
      return true;
    }
    const awareness = model.sharedModel.awareness;
    this.announce();
    const parent = msg ? (msg.parent_header as { session?: unknown }).session : undefined;
    const mine = this.panel.sessionContext.session?.kernel?.clientId;
    if (typeof parent === 'string' && parent === mine) {
      return true;
    }
    let writer: number | null = null;
    for (const [id, state] of awareness.getStates()) {
      const field: unknown = state?.[TARGET];
      if (!isObject(field)) {
        continue;
      }
      if (typeof parent === 'string' && field.kernelClient === parent) {
        return id === awareness.clientID; // another page asked: it writes
      }
      if (writer === null || id < writer) {
        writer = id;
      }
    }
    return writer === null || writer === awareness.clientID;
  }

  /** Tell the other pages (awareness) that this page runs the bridge, and on which connection. */
  private announce(): void {
    const model = this.model;
    const kernel = this.panel.sessionContext.session?.kernel;
    if (!model || !model.collaborative || !kernel) {
      return;
    }
    const awareness = model.sharedModel.awareness;
    const field: unknown = awareness.getLocalState()?.[TARGET];
    if (!isObject(field) || field.kernelClient !== kernel.clientId) {
      awareness.setLocalStateField(TARGET, { kernelClient: kernel.clientId });
    }
    if (!this.greeting.has(awareness)) {
      // The server does not hand a page that joins the states set before it joined (until the
      // next renewal, up to 15 s later): say ours again whenever another page appears, so that
      // it knows who asked for what before the kernel's next message arrives.
      this.greeting.add(awareness);
      awareness.on('change', (change: { added: number[] }) => {
        if (change.added.some(id => id !== awareness.clientID)) {
          awareness.setLocalState(awareness.getLocalState());
        }
      });
    }
  }

  private greeting = new WeakSet<object>();

  // ---- the notebook tool ------------------------------------------------------------------

  /** A new cell below the running one (or below the cell inserted before it); acked with its id. */
  private onInsertCell(comm: Kernel.IComm, request: InsertCell): void {
    const seq = request.seq;
    const model = this.model;
    if (!model) {
      send(comm, { type: 'insert_cell_ack', seq, error: 'the notebook is not loaded' });
      return;
    }
    const ids: string[] = [];
    for (let i = 0; i < model.cells.length; i++) {
      ids.push(model.cells.get(i).id);
    }
    if (request.cell_id && ids.includes(request.cell_id)) {
      // another view or tab of this notebook inserted it already
      send(comm, { type: 'insert_cell_ack', seq, cell_id: request.cell_id, index: ids.indexOf(request.cell_id) });
      return;
    }
    const { index, placement } = insertPosition(ids, request.after, request.anchor);
    const cell =
      request.cell_type === 'code'
        ? { cell_type: 'code', source: request.source, metadata: {}, outputs: [], execution_count: null }
        : { cell_type: 'markdown', source: request.source, metadata: {} };
    const shared = model.sharedModel.insertCell(index, {
      ...cell,
      ...(request.cell_id ? { id: request.cell_id } : {})
    });
    send(comm, { type: 'insert_cell_ack', seq, cell_id: shared.getId(), index, placement });
  }

  /** The cells as they are now: id, type, source, execution count, outputs as text. */
  private onReadCells(comm: Kernel.IComm, seq: ReadCells['seq']): void {
    const model = this.model;
    if (!model) {
      send(comm, { type: 'cells', seq, error: 'the notebook is not loaded' });
      return;
    }
    const cells: CellText[] = [];
    for (let i = 0; i < model.cells.length; i++) {
      const cell = model.cells.get(i);
      const code = isCode(cell);
      cells.push({
        id: cell.id,
        cell_type: cell.type,
        source: cell.sharedModel.getSource(),
        execution_count: code ? (cell.executionCount ?? null) : null,
        outputs: code && cell.outputs ? outputsText(cell.outputs.toJSON()) : ''
      });
    }
    send(comm, { type: 'cells', seq, cells, path: this.panel.context.path ?? null });
  }

  // ---- the push after a kernel start --------------------------------------------------------

  private schedulePush(kernel: Kernel.IKernelConnection, why: string): void {
    const context = this.panel.context;
    const go = () => {
      if (kernel.isDisposed) {
        return;
      }
      // One push per kernel start: a restart is announced twice (by the session context and by
      // the connection). A push still in flight counts, unless its future was disposed (the
      // kernel restarted again) or it is stuck for long.
      const current = this.inflight.get(kernel);
      if (current && !current.future.isDisposed && Date.now() - current.started < 30000) {
        return;
      }
      const model = this.model;
      const meta = this.store?.assemble();
      if (!model || !hasSessions(meta)) {
        return;
      }
      const kernelspec: unknown = model.getMetadata('kernelspec');
      const language = isObject(kernelspec) ? kernelspec.language : undefined;
      if (typeof language === 'string' && language.toLowerCase() !== 'python') {
        return;
      }
      // One request when small, else one per part of at most 1 MiB, queued in order before any
      // user cell: no message comes near the server's websocket limit.
      const codes = pushCodes(meta, this.frontend, `${Date.now().toString(36)}-${Math.random().toString(36).slice(2)}`);
      let future: Kernel.IShellFuture<KernelMessage.IExecuteRequestMsg, KernelMessage.IExecuteReplyMsg> | null =
        null;
      const failed = (why: string) => {
        const text = `ipyagent: the stored sessions could not be handed to the kernel (${why}); run %agent load to read them from the saved notebook.`;
        console.warn(LOG, text);
        Notification.warning(text, { autoClose: false });
      };
      try {
        for (const code of codes) {
          const f = kernel.requestExecute({
            code,
            silent: true,
            store_history: false,
            allow_stdin: false,
            stop_on_error: false
          });
          f.done.then(
            reply => {
              if (reply.content.status !== 'ok') {
                failed(`the kernel answered ${reply.content.status}`);
              }
            },
            () => undefined // disposed: the kernel restarted again, and a new push follows
          );
          future = f;
        }
      } catch (e) {
        failed(String(e));
        return;
      }
      if (!future) {
        return;
      }
      const last = future;
      this.inflight.set(kernel, { future: last, started: Date.now() });
      const done = () => {
        if (this.inflight.get(kernel)?.future === last) {
          this.inflight.delete(kernel);
        }
      };
      last.done.then(done, done);
      console.debug(LOG, `pushed the stored session (${why}, ${codes.length} request(s))`);
    };
    if (context.isReady) {
      // a microtask: after the connection cleared its queue on restart, before any user event
      void Promise.resolve().then(go);
    } else {
      // no user cell can run before the document is loaded
      void context.ready.then(go);
    }
  }

  // ---- journals ---------------------------------------------------------------------------

  /** Lift every journal output of the notebook into the metadata (cell order, by id). */
  liftJournals(): void {
    const model = this.model;
    const store = this.store;
    if (!model || !store) {
      return;
    }
    for (let i = 0; i < model.cells.length; i++) {
      const cell = model.cells.get(i);
      const outputs = cell && isCode(cell) ? cell.outputs : null;
      if (!outputs) {
        continue;
      }
      for (let j = 0; j < outputs.length; j++) {
        const update = updateFromJournal(outputs.get(j)?.data?.[JOURNAL_MIME]);
        if (update) {
          store.apply(update, true);
        }
      }
    }
  }

  /** A journal displayed while the notebook is open is lifted at once. */
  private onIopub(msg: KernelMessage.IIOPubMessage): void {
    if (!hasData(msg)) {
      return;
    }
    const update = updateFromJournal(msg.content.data?.[JOURNAL_MIME]);
    const store = this.store;
    if (update && store && this.writesFor(msg)) {
      store.apply(update, true);
    }
  }

  private _store: ChunkedStore | null = null;
  private _storeModel: INotebookModel | null = null;
  private readonly watched = new WeakSet<Kernel.IKernelConnection>();
  private readonly inflight = new WeakMap<
    Kernel.IKernelConnection,
    {
      future: Kernel.IShellFuture<KernelMessage.IExecuteRequestMsg, KernelMessage.IExecuteReplyMsg>;
      started: number;
    }
  >();
}

const plugin: JupyterFrontEndPlugin<void> = {
  id: 'ipyagent-bridge:plugin',
  description:
    "Stores ipyagent's session entries in the notebook metadata and pushes them back into the kernel after a restart.",
  autoStart: true,
  requires: [INotebookTracker],
  activate: (app: JupyterFrontEnd, tracker: INotebookTracker) => {
    const frontend = /notebook/i.test(app.name) ? 'notebook' : 'jupyterlab';
    const bridges = new WeakMap<object, DocumentBridge>();
    const attach = (panel: NotebookPanel) => {
      // Two views of one notebook share its context (and model): one bridge per context.
      const key = panel.context;
      if (bridges.has(key)) {
        return;
      }
      bridges.set(key, new DocumentBridge(panel, frontend));
    };
    tracker.forEach(attach);
    tracker.widgetAdded.connect((_, panel) => attach(panel));
    console.debug(LOG, `active (${frontend})`);
  }
};

export default plugin;
