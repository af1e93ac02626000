/** The logging surface the bridge needs; VS Code's LogOutputChannel satisfies it as is. */
export interface Log {
  debug(message: string): void;
  info(message: string): void;
  warn(message: string): void;
  error(message: string): void;
}

/** Longest line a capped log writes: a line can quote what any client sent. */
export const LOG_LINE_CHARS = 2_000;

/** `text` cut to `max` characters, saying how many were left out. */
export const cutLine = (text: string, max: number) =>
  text.length <= max ? text : `${text.slice(0, max)}… (${text.length - max} more chars)`;

/** `log`, with every line cut to LOG_LINE_CHARS and how much was left out. */
export function cappedLog(log: Log, max = LOG_LINE_CHARS): Log {
  const cut = (line: string) => cutLine(line, max);
  return {
    debug: (m) => log.debug(cut(m)),
    info: (m) => log.info(cut(m)),
    warn: (m) => log.warn(cut(m)),
    error: (m) => log.error(cut(m)),
  };
}
