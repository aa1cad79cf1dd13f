/**
 * The push after a kernel start (docs/protocol.md, "Rehydration"): the stored sessions handed to
 * the kernel with silent execute requests (push.ts), queued before any cell the user runs.
 */

import { Notification } from '@jupyterlab/apputils';
import type { NotebookPanel } from '@jupyterlab/notebook';
import type { Kernel, KernelMessage } from '@jupyterlab/services';

import { isObject } from '../json';
import { pushCodes } from '../push';
import { hasSessions } from '../store/layout1';
import { LOG } from './notices';

type ExecuteFuture = Kernel.IShellFuture<KernelMessage.IExecuteRequestMsg, KernelMessage.IExecuteReplyMsg>;

/** A push still in flight is waited for this long before another one is sent. */
const STUCK_MS = 30000;

/** Whether the notebook's kernel speaks Python (the push is Python code). */
function isPython(panel: NotebookPanel): boolean {
  const kernelspec: unknown = panel.context.model.getMetadata('kernelspec');
  const language = isObject(kernelspec) ? kernelspec.language : undefined;
  return !(typeof language === 'string' && language.toLowerCase() !== 'python');
}

/** A push that failed is said in a notification that stays. */
function failed(why: string): void {
  const text = `ipyagent: the stored sessions could not be handed to the kernel (${why}); run %agent load to read them from the saved notebook.`;
  console.warn(LOG, text);
  Notification.warning(text, { autoClose: false });
}

/** Pushes one document's stored sessions into each kernel it starts. */
export class KernelPush {
  /** per connection, the last request of the push in flight */
  private readonly inflight = new WeakMap<Kernel.IKernelConnection, { future: ExecuteFuture; started: number }>();

  /** `stored` reads the stored sessions as layout 1 (null when the document has no store). */
  constructor(
    private readonly panel: NotebookPanel,
    private readonly frontend: string,
    private readonly stored: () => unknown
  ) {}

  /** Push once the document is loaded, or (loaded) in a microtask: after the connection cleared
   * its queue on restart, before any user event. */
  schedule(kernel: Kernel.IKernelConnection, why: string): void {
    const context = this.panel.context;
    const go = () => this.push(kernel, why);
    if (context.isReady) {
      void Promise.resolve().then(go);
    } else {
      // no user cell can run before the document is loaded
      void context.ready.then(go);
    }
  }

  private push(kernel: Kernel.IKernelConnection, why: string): void {
    if (kernel.isDisposed) {
      return;
    }
    // One push per kernel start: a restart is announced twice (by the session context and by
    // the connection). A push still in flight counts, unless its future was disposed (the
    // kernel restarted again) or it is stuck for long.
    const current = this.inflight.get(kernel);
    if (current && !current.future.isDisposed && Date.now() - current.started < STUCK_MS) {
      return;
    }
    const model = this.panel.context.model ?? null;
    const meta = this.stored();
    if (!model || !hasSessions(meta) || !isPython(this.panel)) {
      return;
    }
    // One request when small, else one per part of at most 1 MiB, queued in order before any
    // user cell: no message comes near the server's websocket limit.
    const codes = pushCodes(meta, this.frontend, `${Date.now().toString(36)}-${Math.random().toString(36).slice(2)}`);
    const last = this.request(kernel, codes);
    if (!last) {
      return;
    }
    this.inflight.set(kernel, { future: last, started: Date.now() });
    const done = () => {
      if (this.inflight.get(kernel)?.future === last) {
        this.inflight.delete(kernel);
      }
    };
    last.done.then(done, done);
    console.debug(LOG, `pushed the stored session (${why}, ${codes.length} request(s))`);
  }

  /** One silent execute request per code, in order; the last one's future (null when none was
   * sent). */
  private request(kernel: Kernel.IKernelConnection, codes: string[]): ExecuteFuture | null {
    let future: ExecuteFuture | null = null;
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
      return null;
    }
    return future;
  }
}
