/** The logging surface the bridge needs; VS Code's LogOutputChannel satisfies it as is. */
export interface Log {
  debug(message: string): void;
  info(message: string): void;
  warn(message: string): void;
  error(message: string): void;
}
