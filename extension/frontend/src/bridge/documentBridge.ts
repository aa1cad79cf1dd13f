/**
 * Everything the bridge keeps for one open document (shared by all views of it): the comm on each
 * of its kernel connections, the session store over its metadata, the push after a kernel start,
 * the journal outputs lifted, the notebook tool's requests answered.
 */

import type { INotebookModel, NotebookPanel } from '@jupyterlab/notebook';
import type { Kernel, KernelMessage } from '@jupyterlab/services';

import { FEATURES, readMessage } from '../messages';
import { JOURNAL_MIME, updateFromJournal } from '../outputs';
import { PROTOCOL } from '../protocol';
import type { Entries } from '../protocol';
import { ChunkedStore } from '../store/chunkedStore';
import { chunkNumber } from '../store/chunkKeys';
import { IMetadataAccess, METADATA_KEY } from '../store/metadata';
import { OneWriter } from './collaboration';
import { CommSender, TARGET, commsOverSubshells, hasData } from './comm';
import { IdleMove } from './idleMove';
import { KernelPush } from './kernelPush';
import { insertCell, isCode, readCells } from './notebookTool';
import { Warnings } from './notices';
import { RendererWarmup } from './renderer';

/** The notebook model's metadata, one key at a time: the keys come from the shared document's
 * metadata map without copying any value (`model.metadata` would copy all of them). */
function metadataAccess(model: INotebookModel): IMetadataAccess {
  type Shared = { ymeta?: { get(key: string): unknown } };
  return {
    keys: () => {
      const ymetadata = (model.sharedModel as unknown as Shared).ymeta?.get('metadata') as
        { keys(): Iterable<string> } | undefined;
      return ymetadata && typeof ymetadata.keys === 'function' ? ymetadata.keys() : Object.keys(model.metadata);
    },
    get: key => model.getMetadata(key),
    set: (key, value) => model.setMetadata(key, value)
  };
}

export class DocumentBridge {
  /** The comms that said hello on this document's kernels, each told of a new path. */
  private readonly comms = new Set<Kernel.IComm>();
  private readonly sender = new CommSender();
  private readonly warnings = new Warnings();
  private readonly writer: OneWriter;
  private readonly kernelPush: KernelPush;
  private readonly idleMove: IdleMove;
  /** the connections whose IOPub messages are watched for journal outputs */
  private readonly watched = new WeakSet<Kernel.IKernelConnection>();
  private _store: ChunkedStore | null = null;
  private _storeModel: INotebookModel | null = null;

  constructor(
    private readonly panel: NotebookPanel,
    private readonly frontend: string,
    private readonly warmup: RendererWarmup
  ) {
    this.writer = new OneWriter(panel);
    this.kernelPush = new KernelPush(panel, frontend, () => this.store?.assemble());
    this.idleMove = new IdleMove(() => {
      const store = this.store;
      return store && !this.panel.isDisposed && this.writer.writesFor(null) ? store : null;
    });
    const sc = panel.sessionContext;
    sc.kernelChanged.connect((_, args) => this.onKernel(args.newValue, 'kernel'), this);
    sc.statusChanged.connect((_, status) => this.onStatus(status), this);
    if (sc.session?.kernel) {
      this.onKernel(sc.session.kernel, 'kernel');
    }
    void panel.context.ready.then(() => {
      panel.context.model.metadataChanged.connect((_, change) => this.onMetadataChanged(change), this);
      this.liftJournals();
      this.idleMove.schedule();
    });
    // a rename (and the rename of a new notebook on its first save): the kernel follows the path
    panel.context.pathChanged.connect((_, path) => this.onPathChanged(path), this);
  }

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

  private get model(): INotebookModel | null {
    return this.panel.context.model ?? null;
  }

  /** The session store over this document's metadata (layout 3: chunks under their own keys). */
  private get store(): ChunkedStore | null {
    const model = this.model;
    if (!model) {
      return null;
    }
    if (!this._store || this._storeModel !== model) {
      this._storeModel = model;
      this._store = new ChunkedStore(metadataAccess(model), text => this.warnings.warnOnce(text));
    }
    return this._store;
  }

  private onPathChanged(path: string): void {
    for (const comm of [...this.comms]) {
      if (comm.isDisposed) {
        this.comms.delete(comm);
      } else {
        this.sender.send(comm, { type: 'path', path });
      }
    }
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

  // ---- kernel connections -----------------------------------------------------------------

  private onKernel(kernel: Kernel.IKernelConnection | null, why: string): void {
    if (!kernel) {
      return;
    }
    this.registerTarget(kernel);
    void this.panel.context.ready.then(() => this.writer.announce());
    if (!this.watched.has(kernel)) {
      this.watched.add(kernel);
      kernel.iopubMessage.connect((_, msg) => this.onIopub(msg), this);
    }
    this.kernelPush.schedule(kernel, why);
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
      this.kernelPush.schedule(kernel, 'restart');
    } else if (status === 'starting') {
      this.registerTarget(kernel);
    }
  }

  private registerTarget(kernel: Kernel.IKernelConnection): void {
    // Idempotent: one callback per target name per connection; survives restarts, but
    // registering again after one costs nothing.
    kernel.registerCommTarget(TARGET, (comm, msg) => this.onCommOpen(kernel, comm, msg));
  }

  /** A journal displayed while the notebook is open is lifted at once. */
  private onIopub(msg: KernelMessage.IIOPubMessage): void {
    if (!hasData(msg)) {
      return;
    }
    const update = updateFromJournal(msg.content.data?.[JOURNAL_MIME]);
    const store = this.store;
    if (update && store && this.writer.writesFor(msg)) {
      store.apply(update, true);
    }
  }

  // ---- the comm ---------------------------------------------------------------------------

  private onCommOpen(kernel: Kernel.IKernelConnection, comm: Kernel.IComm, msg: KernelMessage.ICommOpenMsg): void {
    comm.onMsg = (m: KernelMessage.ICommMsgMsg) => this.onCommMsg(comm, m);
    this.sender.waitForSubshell(comm, kernel);
    if (readMessage(msg.content.data)?.type === 'hello') {
      this.comms.add(comm);
      this.sender.send(comm, {
        type: 'hello_ack',
        protocol: PROTOCOL,
        frontend: this.frontend,
        path: this.panel.context.path ?? null,
        features: FEATURES,
        // our later comm messages reach the kernel while a cell runs (JupyterLab 4.6+ sends them
        // over a kernel subshell when the kernel has subshells)
        subshells: commsOverSubshells(kernel)
      });
      this.warmup.warm(this.panel.content.rendermime);
    }
  }

  private onCommMsg(comm: Kernel.IComm, msg: KernelMessage.ICommMsgMsg): void {
    const message = readMessage(msg.content.data);
    switch (message?.type) {
      case 'entries':
        this.onEntries(comm, message, msg);
        break;
      case 'insert_cell':
        this.sender.send(comm, insertCell(this.model, message));
        break;
      case 'read_cells':
        this.sender.send(comm, readCells(this.model, message.seq, this.panel.context.path ?? null));
        break;
      case 'invalid':
        if (message.of === 'insert_cell') {
          this.sender.send(comm, {
            type: 'insert_cell_ack',
            seq: message.seq,
            error: 'not a valid insert_cell request'
          });
        }
        break;
    }
  }

  private onEntries(comm: Kernel.IComm, update: Entries, msg: KernelMessage.ICommMsgMsg): void {
    const store = this.store;
    if (!store || !this.writer.writesFor(msg)) {
      return;
    }
    const result = store.apply(update);
    this.sender.send(comm, {
      type: 'ack',
      seq: update.seq,
      session: update.session,
      stored: result.stored,
      ids: result.ids
    });
  }
}
