import { cpSync, existsSync } from 'node:fs';
import { homedir } from 'node:os';
import { join } from 'node:path';
import * as vscode from 'vscode';
import { skillDirs } from './core/agents/agentConfig';
import { errorMessage } from './core/errorMessage';

interface SkillTarget extends vscode.QuickPickItem {
  dir: string;
}

/**
 * `agentBridge.installSkill`: copies the skill shipped in the extension into the personal skill
 * folders of Claude Code and/or Codex. Only our own folder is written; other skills are untouched.
 */
export async function installSkill(sourceDir: string): Promise<void> {
  if (!existsSync(join(sourceDir, 'SKILL.md'))) {
    void vscode.window.showErrorMessage(`The Agent Bridge skill is missing from the extension (${sourceDir}).`);
    return;
  }
  const dirs = skillDirs(homedir(), join);
  const items: SkillTarget[] = [
    { label: 'Claude Code', description: dirs.claude, dir: dirs.claude, picked: true },
    { label: 'Codex', description: dirs.codex, dir: dirs.codex, picked: true },
  ];
  const picked = await vscode.window.showQuickPick(items, {
    canPickMany: true,
    placeHolder: 'Install the agent-bridge skill for…',
  });
  if (!picked?.length) return;
  const done: string[] = [];
  try {
    for (const target of picked) {
      cpSync(sourceDir, target.dir, { recursive: true, force: true });
      done.push(target.dir);
    }
  } catch (error) {
    void vscode.window.showErrorMessage(`Could not install the skill: ${errorMessage(error)}`);
    return;
  }
  void vscode.window.showInformationMessage(
    `Installed the agent-bridge skill in ${done.join(' and ')}. Agents pick it up in their next session.`,
  );
}
