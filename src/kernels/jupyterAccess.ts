import * as vscode from 'vscode';
import type { StreamEvent } from '../core/model/kernelPort';
import type { Log } from '../core/log';
import { isAccessRevoked, watchRevocation } from './accessRevoked';
import type { ApiKernel } from './extensionApi';

/** The Jupyter extension's command for changing an earlier answer. */
export const MANAGE_ACCESS_COMMAND = 'Jupyter: Manage Access To Jupyter Kernels';
/** A probe still unanswered after this long is waiting on the person's answer (or a busy kernel). */
const ASKING_AFTER_MS = 400;

type Answer = 'allowed' | 'refused';

/**
 * The person's consent to the bridge using a Jupyter kernel. The Jupyter extension asks it
 * with a modal dialog the first time code is sent, and keeps the code waiting meanwhile, with no
 * time limit; code a client gave up on would still run once the person clicks Allow. So the
 * bridge asks first, with an empty probe of its own, and sends an agent's code only after the
 * answer: a request abandoned while the dialog is up never runs. While the person has not
 * answered, the request's stream and a notification of ours say so. A refusal (Deny, Cancel or
 * Escape) is remembered per kernel by the Jupyter extension until the person changes it with
 * "Jupyter: Manage Access To Jupyter Kernels"; the bridge answers 403 meanwhile. Access taken away
 * there after an Allow is learnt from the next code Jupyter refuses (`guard`).
 */
export class JupyterAccess {
  private readonly answers = new WeakMap<ApiKernel, Answer>();
  private readonly probes = new WeakMap<ApiKernel, Promise<Answer>>();

  constructor(private readonly log: Log) {}

  /** True when the person refused; a refusal is re-checked (cheaply) so a later grant takes effect. */
  async refused(kernel: ApiKernel): Promise<boolean> {
    if (this.answers.get(kernel) !== 'refused') return false;
    return (await this.probe(kernel, 're-check')) === 'refused';
  }

  /**
   * Waits for the person's answer before an agent's code is sent: true when allowed; false,
   * with the reason on the stream, when refused or abandoned (`signal`) meanwhile.
   */
  async admit(kernel: ApiKernel, label: string, onStream: (event: StreamEvent) => void, signal: AbortSignal): Promise<boolean> {
    if (this.answers.get(kernel) === 'allowed') return true;
    const answer = this.probe(kernel, label);
    let notice: vscode.Disposable | undefined;
    const asking = setTimeout(() => {
      if (kernel.status === 'busy') return; // queued behind a running cell, not waiting on the person
      onStream({
        name: 'stderr',
        text:
          `Waiting for the person's permission in VS Code: the Jupyter extension asks whether "Agent Bridge" may use ` +
          `the kernel of ${label}. The code runs once they click Allow, and never if this request is abandoned first.\n`,
      });
      this.log.info(`waiting for the person to allow Agent Bridge access to the Jupyter kernel of ${label}`);
      notice = this.notify(label, answer);
    }, ASKING_AFTER_MS);
    const abandoned = new Promise<'abandoned'>((resolve) => {
      if (signal.aborted) resolve('abandoned');
      signal.addEventListener('abort', () => resolve('abandoned'), { once: true });
    });
    try {
      const outcome = await Promise.race([answer, abandoned]);
      if (outcome === 'abandoned') {
        this.log.info(`a request for the Jupyter kernel of ${label} was abandoned while waiting for permission: it will not run`);
        return false;
      }
      if (outcome === 'refused') onStream({ name: 'stderr', text: `${refusal(label)}\n` });
      return outcome === 'allowed';
    } finally {
      clearTimeout(asking);
      notice?.dispose();
    }
  }

  /** The kernel to send an agent's code to: a refusal there is learnt, and said as ours. */
  guard(kernel: ApiKernel, label: string): ApiKernel {
    return watchRevocation(kernel, () => {
      this.learn(kernel, label, 'refused');
      return new Error(refusal(label));
    });
  }

  /** One probe per kernel at a time: every waiting request shares the person's one answer. */
  private probe(kernel: ApiKernel, label: string): Promise<Answer> {
    let probe = this.probes.get(kernel);
    if (!probe) {
      probe = this.ask(kernel, label).finally(() => this.probes.delete(kernel));
      this.probes.set(kernel, probe);
    }
    return probe;
  }

  private async ask(kernel: ApiKernel, label: string): Promise<Answer> {
    const never = new vscode.CancellationTokenSource();
    let answer: Answer = 'allowed';
    try {
      // Empty code: harmless whenever it runs, and it runs only once the person has allowed it.
      for await (const _output of kernel.executeCode('', never.token)) void _output;
    } catch (error) {
      // Any other failure (a dead kernel, say) is the run's to report, not a refusal.
      if (isAccessRevoked(error)) answer = 'refused';
    } finally {
      never.dispose();
    }
    this.learn(kernel, label, answer);
    return answer;
  }

  private learn(kernel: ApiKernel, label: string, answer: Answer): void {
    const before = this.answers.get(kernel);
    this.answers.set(kernel, answer);
    if (answer === before) return;
    if (answer === 'refused')
      this.log.warn(
        `${refusal(label)} (the person chose Deny or Cancel, now or earlier, or took access away in that command); agents get 403 until then`,
      );
    else this.log.info(`the person allowed Agent Bridge access to the Jupyter kernel of ${label}`);
  }

  /** Our own notice beside Jupyter's modal, so the person knows who is waiting and why. */
  private notify(label: string, answer: Promise<Answer>): vscode.Disposable {
    let close = () => {};
    const closed = new Promise<void>((resolve) => (close = resolve));
    void vscode.window.withProgress(
      {
        location: vscode.ProgressLocation.Notification,
        title: `Agent Bridge: an agent is waiting for your permission to run code in the Jupyter kernel of ${label}. Answer VS Code's "grant Kernel access" dialog.`,
      },
      () => Promise.race([answer, closed]),
    );
    return { dispose: close };
  }
}

/** What an agent reads after the person refused. */
export function refusal(label: string): string {
  return (
    `The person refused Agent Bridge access to the Jupyter kernel of ${label}: ask them to allow "Agent Bridge" ` +
    `with the command "${MANAGE_ACCESS_COMMAND}", then retry`
  );
}
