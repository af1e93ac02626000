import * as vscode from 'vscode';
import type { AgentAction, Answer, RiskQuestion } from '../core/agents/accessPolicy';
import { describeFindings, kindOf } from '../core/model/riskScan';

const ALLOW = 'Allow';
const ALLOW_10 = 'Allow for 10 Minutes';
const ALLOW_KIND = 'Allow This Kind for 10 Minutes';
const ALLOW_KINDS = 'Allow These Kinds for 10 Minutes';
const DENY = 'Deny';
const NOT_NOW = 'Not Now';
const SHOW = 'Show Code';
const EXPIRED = Symbol('expired');
const WITHDRAWN = Symbol('withdrawn');

/**
 * The `ask` mode's question: a notification naming the client, the action and the notebook, with
 * the code in full on request. With `risk` (the `ask-risky` mode), it names each finding of the
 * risk scan with its line, and "for 10 minutes" allows those kinds of finding only. No answer
 * within `timeoutMs` is a refusal (the notification may stay on screen; a late click changes nothing).
 */
export async function askPerson(
  action: AgentAction,
  where: string,
  timeoutMs: number,
  gone?: AbortSignal,
  risk?: RiskQuestion,
): Promise<Answer> {
  const deadline = Date.now() + timeoutMs;
  // The name as the client gave it (never re-cased), with what it is worth; the long form is in the audit log.
  const a = /^([aeiou]|mcp )/i.test(action.label) ? 'an' : 'a';
  const what = risk ? ` that the risk scan flags: ${describeFindings(risk.report, 3).join('; ')}` : `: ${action.summary}`;
  const message = `${action.client} wants ${a} ${action.label} in ${where}${what} (no answer in ${Math.round(timeoutMs / 1000)} s: denied)`;
  const allowFor = risk ? (new Set(risk.report.findings.map(kindOf)).size > 1 ? ALLOW_KINDS : ALLOW_KIND) : ALLOW_10;
  for (;;) {
    const left = deadline - Date.now();
    if (left <= 0) return 'no-answer';
    let timer: NodeJS.Timeout | undefined;
    // The timer says so itself: it may fire a millisecond before Date.now() reaches the deadline.
    const expired = new Promise<typeof EXPIRED>((resolve) => (timer = setTimeout(() => resolve(EXPIRED), left)));
    const withdrawn = new Promise<typeof WITHDRAWN>((resolve) => {
      if (gone?.aborted) resolve(WITHDRAWN);
      gone?.addEventListener('abort', () => resolve(WITHDRAWN), { once: true });
    });
    const choice = await Promise.race([
      vscode.window.showWarningMessage(message, ALLOW, allowFor, DENY, SHOW),
      expired,
      withdrawn,
    ]);
    clearTimeout(timer);
    if (choice === EXPIRED) return 'no-answer';
    if (choice === WITHDRAWN) {
      // The API cannot take a notification back: a second one marks the first as withdrawn.
      void vscode.window.showInformationMessage(
        `Withdrawn: ${action.client} left before you answered its ${action.label} in ${where}. Nothing was started; a click on the earlier prompt does nothing.`,
      );
      return 'withdrawn';
    }
    if (choice === ALLOW) return 'allow';
    if (choice === allowFor) return 'allow-10-minutes';
    if (choice === DENY || choice === undefined) return 'deny'; // closed with its X: a refusal
    const doc = await vscode.workspace.openTextDocument(
      risk
        ? {
            content: `${describeFindings(risk.report, 50)
              .map((l) => `# risk: ${l}`)
              .join('\n')}\n\n${risk.code}`,
            language: 'python',
          }
        : { content: action.code, language: action.kind === 'execute' ? 'python' : 'json' },
    );
    await vscode.window.showTextDocument(doc, { preview: true, preserveFocus: true });
  }
}

/**
 * A yes-or-no question from the bridge itself (not an agent action under the access mode), as a
 * notification with one button for yes; closing it is no, and so is silence past `timeoutMs`.
 */
export async function confirmWithPerson(
  question: { message: string; yes: string },
  timeoutMs: number,
): Promise<'yes' | 'no' | 'no-answer'> {
  let timer: NodeJS.Timeout | undefined;
  const expired = new Promise<typeof EXPIRED>((resolve) => (timer = setTimeout(() => resolve(EXPIRED), timeoutMs)));
  const notAnswered = `(no answer in ${Math.round(timeoutMs / 1000)} s: no)`;
  const choice = await Promise.race([
    vscode.window.showWarningMessage(`Agent Bridge: ${question.message} ${notAnswered}`, question.yes, NOT_NOW),
    expired,
  ]);
  clearTimeout(timer);
  if (choice === EXPIRED) return 'no-answer';
  return choice === question.yes ? 'yes' : 'no';
}
