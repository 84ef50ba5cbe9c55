// clawgate console: live updates without a build step. The server says "change" on
// /console/events (server-sent events); the page then fetches itself again and swaps its
// <main>, keeping what the person is typing (an open form is left alone until it is sent).
// A page whose facts change without an audit entry (Health) marks its <main> with
// data-poll="<seconds>" and is fetched again that often besides, while it is shown.
(function () {
  "use strict";
  var busy = false;
  var again = false;  // a change came while a fetch was under way: fetch once more after it
  function typing() {
    var a = document.activeElement;
    return a && (a.tagName === "TEXTAREA" || (a.tagName === "INPUT" && a.type !== "hidden"));
  }
  function refresh() {
    if (busy) { again = true; return; }
    if (typing()) { return; }
    busy = true;
    again = false;
    // The header says no one acted: the session's idle time is not renewed by it.
    var headers = { "Accept": "text/html", "X-Clawgate-Refresh": "1" };
    fetch(window.location.href, { credentials: "same-origin", headers: headers })
      .then(function (r) { return r.ok ? r.text() : null; })
      .then(function (html) {
        if (html === null) { return; }
        var fresh = new DOMParser().parseFromString(html, "text/html").getElementById("live");
        var main = document.getElementById("live");
        if (fresh && main) {
          main.replaceChildren.apply(main, Array.prototype.slice.call(fresh.childNodes));
          document.body.setAttribute("data-refreshed", String(Date.now()));
        }
      })
      .catch(function () { /* offline for a moment: the next change or poll tries again */ })
      .finally(function () { busy = false; if (again) { refresh(); } });
  }
  var main = document.getElementById("live");
  var every = main ? parseFloat(main.getAttribute("data-poll") || "") : NaN;
  if (every > 0) {
    window.setInterval(function () { if (!document.hidden) { refresh(); } }, every * 1000);
  }
  // A page that is costly to make (Insight), or that answered a form (its address takes no
  // GET), is not made again on every change.
  var url = main && main.hasAttribute("data-still") ? null : document.body.getAttribute("data-live");
  if (!url || !window.EventSource) { return; }
  var source = new EventSource(url);
  source.addEventListener("change", refresh);
  source.addEventListener("open", function () { document.body.setAttribute("data-live-open", "1"); });
})();
