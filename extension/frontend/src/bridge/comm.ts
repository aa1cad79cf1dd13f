/**
 * The `ipyagent` comm's transport on a kernel connection: the comm target's name, whether comm
 * messages go over a kernel subshell (JupyterLab 4.6+), and sending, each comm's messages in
 * order and after its subshell exists.
 */

import type { Kernel, KernelMessage } from '@jupyterlab/services';

import type { ToKernel } from '../protocol';

export const TARGET = 'ipyagent';

/** What JupyterLab 4.6 added to a kernel connection (so: absent before it). */
type SubshellFields = { supportsSubshells?: boolean; commsOverSubshells?: string };

/** How long a comm's first message waits for the comm's subshell before going to the main shell. */
const SUBSHELL_WAIT_MS = 10000;

/** Whether this connection sends comm messages over a kernel subshell (JupyterLab 4.6+). */
export function commsOverSubshells(kernel: SubshellFields): boolean {
  return (
    kernel.supportsSubshells === true &&
    kernel.commsOverSubshells !== undefined &&
    kernel.commsOverSubshells !== 'disabled'
  );
}

/** The IOPub messages with a mime bundle (where a journal output can be). A guard of our own:
 * `KernelMessage.isDisplayDataMsg` and its kin would make @jupyterlab/services a runtime import. */
export function hasData(
  msg: KernelMessage.IIOPubMessage
): msg is KernelMessage.IDisplayDataMsg | KernelMessage.IUpdateDisplayDataMsg | KernelMessage.IExecuteResultMsg {
  const type = msg.header.msg_type;
  return type === 'display_data' || type === 'update_display_data' || type === 'execute_result';
}

/** Sends on the comms of one document's kernels. */
export class CommSender {
  /** Per comm: resolves once its messages can go over its subshell (or never will). */
  private readonly ready = new WeakMap<Kernel.IComm, Promise<void>>();

  /**
   * JupyterLab 4.6+ gives each comm target a kernel subshell, but a comm opened by the kernel
   * gets its subshell id only once the subshell is created; a message sent before goes to the
   * main shell, which a Run All keeps busy until every queued cell has run (the handshake of
   * `%load_ext` would wait for all of them). So a comm's messages wait for its subshell.
   */
  waitForSubshell(comm: Kernel.IComm, kernel: Kernel.IKernelConnection): void {
    const started = (comm as { subshellStarted?: Promise<void> }).subshellStarted;
    if (!commsOverSubshells(kernel) || !started) {
      return;
    }
    const timeout = new Promise<void>(resolve => setTimeout(resolve, SUBSHELL_WAIT_MS));
    this.ready.set(comm, Promise.race([started.catch(() => undefined), timeout]));
  }

  /** Every message to the kernel goes through here, so it is one of the protocol's. Messages of
   * one comm keep their order: each waits on the same promise. */
  send(comm: Kernel.IComm, message: ToKernel): void {
    const ready = this.ready.get(comm);
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
}
