/**
 * marimo's scratchpad contract for a Jupyter Python kernel, which runs whatever code it is sent
 * in the notebook's own namespace: the agent's code is sent wrapped in a small program that runs
 * it in a shallow copy of the IPython user namespace instead.
 *
 * - Notebook globals are readable; new top-level bindings land in the copy and are discarded;
 *   in-place mutation of existing objects persists (the copy is shallow).
 * - A trailing expression is evaluated separately and published as display data marked with
 *   VALUE_MIME, which the adapter takes as the run's value (not as a display).
 * - The wrapper binds nothing in the user namespace (it runs in a dict of its own) and its
 *   own statement is a call returning None, so IPython's `_`, `Out` and `In` stay untouched;
 *   the Jupyter extension's executeCode does not count executions.
 * - Errors are shown by IPython itself (`showtraceback` with the wrapper's frame cut off,
 *   `showsyntaxerror`): the same traceback a cell gives, once.
 * - Top-level `await` compiles; the coroutine runs to completion on a fresh event loop in a
 *   helper thread, since the kernel's own loop is busy running this code.
 */

/** Marks the display data that carries the scratchpad's value. */
export const VALUE_MIME = 'application/vnd.agent-bridge.scratchpad-value+json';

const WRAPPER = String.raw`
def main(source, value_mime):
    import ast, linecache, sys
    ip = get_ipython()
    filename = '<scratchpad>'
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    flags = getattr(ast, 'PyCF_ALLOW_TOP_LEVEL_AWAIT', 0)
    try:
        tree = ast.parse(source, filename, 'exec')
        last = tree.body.pop() if tree.body and isinstance(tree.body[-1], ast.Expr) else None
        body = compile(tree, filename, 'exec', flags=flags)
        tail = compile(ast.Expression(last.value), filename, 'eval', flags=flags) if last else None
    except (SyntaxError, ValueError, OverflowError):
        ip.showsyntaxerror(filename)
        return
    namespace = dict(ip.user_ns)
    def run(code):
        result = eval(code, namespace)
        if code.co_flags & 0x80:  # CO_COROUTINE: top-level await
            import asyncio, concurrent.futures
            with concurrent.futures.ThreadPoolExecutor(1) as pool:
                result = pool.submit(asyncio.run, result).result()
        return result
    try:
        run(body)
        value = run(tail) if tail else None
    except BaseException:
        ip.showtraceback(tb_offset=2)
        return
    if value is not None:
        data, metadata = ip.display_formatter.format(value)
        data[value_mime] = {}
        ip.display_pub.publish(data=data, metadata=metadata)
main(SOURCE, VALUE_MIME)
`;

/** The Python program sent through executeCode for `source`; JSON string literals are Python's too. */
export function wrapPythonScratchpad(source: string): string {
  const globals = `{"__builtins__": __builtins__, "SOURCE": ${JSON.stringify(source)}, "VALUE_MIME": ${JSON.stringify(VALUE_MIME)}}`;
  return `exec(${JSON.stringify(WRAPPER)}, ${globals})`;
}
