"""Rich values of the Agent Bridge builtin kernel: a value as a mime bundle (Jupyter's display
protocol), the caps that keep any output within what the host takes, and matplotlib's open
figures as PNGs (stdlib only, 3.8+). kernel.py loads this file beside itself; nothing here keeps
state or sends a message: kernel.py sends what these functions build.
"""

import base64
import io
import json
import sys

TEXT_CHARS = 1 << 20  # a value's text, an error message or a traceback keeps head + tail within this
_DATA_CHARS = 16 << 20  # a binary display item (base64) above this is replaced by a note
_REPR_METHODS = (
    ("text/html", "_repr_html_"),
    ("text/markdown", "_repr_markdown_"),
    ("image/svg+xml", "_repr_svg_"),
    ("image/png", "_repr_png_"),
    ("image/jpeg", "_repr_jpeg_"),
    ("application/json", "_repr_json_"),
    ("text/latex", "_repr_latex_"),
)


_PLAIN_TYPES = frozenset((int, float, complex, str, bytes, bool, list, tuple, dict, set, frozenset, range))


def _getattr(value, name):
    try:
        return getattr(value, name, None)
    except Exception:
        return None


def _mime_text(mime, data):
    if isinstance(data, tuple) and data:
        data = data[0]  # (data, metadata)
    if isinstance(data, str):
        return data
    if isinstance(data, (bytes, bytearray)):
        if mime.startswith("text/") or mime == "image/svg+xml":
            return bytes(data).decode("utf-8", "replace")
        return base64.b64encode(bytes(data)).decode("ascii")
    if data is not None and "json" in mime:
        return json.dumps(data)
    return None


def cut(text, limit=TEXT_CHARS, show=str):
    """An oversize text (or str/bytes value) as its head and tail, with a marker saying how much
    was cut; `show` renders each part."""
    n = len(text)
    if n <= limit:
        return show(text)
    keep = limit // 2
    return "%s\n[... %d of %d characters cut by Agent Bridge ...]\n%s" % (show(text[:keep]), n - 2 * keep, n, show(text[-keep:]))


def plain_repr(value):
    # A huge str or bytes is cut before repr, which would copy it whole (and up to 4x over); with
    # room for the quotes and the marker, so capped (IPython's path) does not cut it again.
    if type(value) in (str, bytes):
        return cut(value, TEXT_CHARS - 256, repr)
    return cut(repr(value))


def capped(data):
    """A mimebundle within the caps: texts keep head and tail; a binary item that is too big
    (cutting would corrupt it) is dropped, with a note in text/plain."""
    notes = []
    for mime in list(data):
        text = data[mime]
        if len(text) <= TEXT_CHARS:
            continue
        if mime.startswith("text/") or mime == "image/svg+xml":
            data[mime] = cut(text)
        elif len(text) > _DATA_CHARS:
            del data[mime]
            notes.append("[%s output of %d characters dropped by Agent Bridge: over the limit of %d]" % (mime, len(text), _DATA_CHARS))
    if notes:
        data["text/plain"] = "\n".join([data["text/plain"]] + notes if "text/plain" in data else notes)
    return data


def string_bundle(formatted):
    """A {mime: data} dict (str, bytes or JSON data) as the protocol's {mime: str}."""
    data = {}
    for mime, item in formatted.items():
        text = _mime_text(str(mime), item)
        if text is not None:
            data[str(mime)] = text
    return data


def mimebundle(value):
    """Jupyter's display protocol, within the output caps."""
    if type(value) in _PLAIN_TYPES:
        return {"text/plain": plain_repr(value)}
    return capped(_rich_bundle(value))


def _rich_bundle(value):
    """_repr_mimebundle_ wins over the single _repr_*_ methods."""
    data = {}
    # Classes have the methods unbound; objects answering every attribute (mocks) are not displayable.
    if not isinstance(value, type) and _getattr(value, "_agent_bridge_no_such_attribute_") is None:
        method = _getattr(value, "_repr_mimebundle_")
        if callable(method):
            try:
                bundle = method(include=None, exclude=None)
                if isinstance(bundle, tuple):
                    bundle = bundle[0] if bundle else None
                if isinstance(bundle, dict):
                    data.update(string_bundle(bundle))
            except Exception:
                pass
        for mime, name in _REPR_METHODS:
            if mime in data:
                continue
            method = _getattr(value, name)
            if callable(method):
                try:
                    text = _mime_text(mime, method())
                except Exception:
                    continue
                if text is not None:
                    data[mime] = text
    if "text/plain" not in data:
        try:
            data["text/plain"] = repr(value)
        except Exception as e:
            data["text/plain"] = "<%s object (repr failed: %s)>" % (type(value).__name__, type(e).__name__)
    return data


def figures(warn):
    """Each open matplotlib figure as a PNG bundle, yielded as it is rendered; then closes them
    all, so the next run starts without them. `warn` gets the text of a figure that fails."""
    plt = sys.modules.get("matplotlib.pyplot")
    if plt is None:
        return
    try:
        nums = list(plt.get_fignums())
    except Exception:
        return
    for num in nums:
        try:
            fig = plt.figure(num)
            out = io.BytesIO()
            fig.savefig(out, format="png", bbox_inches="tight")
            data = {"image/png": base64.b64encode(out.getvalue()).decode("ascii"), "text/plain": repr(fig)}
        except Exception as e:
            warn("Could not render figure %s: %s: %s\n" % (num, type(e).__name__, e))
            continue
        yield capped(data)
    try:
        plt.close("all")
    except Exception:
        pass
