/**
 * One writer per message under real-time collaboration (docs/protocol.md, "One writer under
 * collaboration"): every page of the notebook gets the kernel's messages, and all of them write
 * into one shared document, so exactly one page stores (and acks) each message.
 */

import type { NotebookPanel } from '@jupyterlab/notebook';
import type { KernelMessage } from '@jupyterlab/services';

import { isObject } from '../json';
import { TARGET } from './comm';

/** Decides, for one document, whether this page stores a message. */
export class OneWriter {
  /** the awareness objects whose changes this page answers with its state */
  private readonly greeting = new WeakSet<object>();

  constructor(private readonly panel: NotebookPanel) {}

  /**
   * The page that stores a message is the one whose kernel connection sent the request the
   * message answers (its parent header's session is that connection's client id, which each page
   * announces in its awareness state); for a message no page asked for (a resend after a push, a
   * message from a kernel thread) the page with the smallest awareness client id among those
   * running this bridge. Without collaboration each page has a model of its own, and each stores
   * every message.
   */
  writesFor(msg: KernelMessage.IMessage | null): boolean {
    const model = this.panel.context.model ?? null;
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
  announce(): void {
    const model = this.panel.context.model ?? null;
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
}
