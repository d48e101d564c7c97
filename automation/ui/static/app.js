// Refresh the page's live part every few seconds without reloading it: fetch its fragment,
// swap it in, say when the data is from, and mark it stale when a refresh fails.
//
// For keyboard and screen-reader users: the live part is swapped only when its data changed
// (not for a new "as of" time alone), the element that had focus inside it gets it back
// after a swap, and only a change between fresh and stale is announced.
(function () {
  "use strict";
  var POLL_MS = 3000;
  var AS_OF = /data-as-of="([^"]*)"/;
  function start() {
    var live = document.getElementById("live");
    if (!live) { return; }
    var url = live.getAttribute("data-fragment");
    var asOf = document.querySelector(".freshness .as-of time");
    var stale = document.querySelector(".freshness .stale");
    var status = document.querySelector(".freshness [role=status]");
    var busy = false;
    var shown = live.getAttribute("data-version");  // what the live part shows (pages.py)
    function say(text) { if (status && status.textContent !== text) { status.textContent = text; } }
    function failed() {
      if (stale.hidden) { say("Data is stale: the last refresh failed."); }
      stale.hidden = false;
      document.body.classList.add("is-stale");
    }
    // What identifies the focused element inside the live part, to find it after a swap.
    function focusKey() {
      var el = document.activeElement;
      if (!el || el === live || !live.contains(el)) { return null; }
      if (el.id) { return "#" + CSS.escape(el.id); }
      var href = el.getAttribute("href");
      return href ? "[href=\"" + CSS.escape(href) + "\"]" : null;
    }
    function swap(html) {
      var key = focusKey();
      live.innerHTML = html;
      if (key) {
        var again = live.querySelector(key);
        if (again) { again.focus({preventScroll: true}); }
      }
    }
    function poll() {
      if (busy) { return; }
      busy = true;
      fetch(url, {credentials: "same-origin", cache: "no-store",
                  headers: {"Accept": "text/html"}})
        .then(function (r) {
          if (r.status === 401) { window.location.assign(live.baseURI.replace(/\/ui\/.*$/, "/ui/login")); return null; }
          if (!r.ok) { throw new Error("HTTP " + r.status); }
          var version = r.headers.get("X-Live-Version");
          return r.text().then(function (html) { return {html: html, version: version}; });
        })
        .then(function (got) {
          if (got === null) { return; }
          var html = got.html;
          if (!got.version || got.version !== shown) {
            swap(html);
            shown = got.version;
          }
          var when = AS_OF.exec(html);
          if (when && asOf) { asOf.textContent = when[1]; }
          if (!stale.hidden) { say("Data refreshed."); }
          stale.hidden = true;
          document.body.classList.remove("is-stale");
          // When the first refresh was applied, for benchmarks/bench_dashboard.py.
          var root = document.documentElement;
          if (!root.dataset.refreshedAt) { root.dataset.refreshedAt = String(performance.now()); }
        })
        .catch(failed)
        .then(function () { busy = false; });
    }
    window.setInterval(poll, POLL_MS);
  }
  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", start);
  } else { start(); }

  // The overview's cost chart, fetched once after the page's load so that computing it does
  // not delay the table (it is not polled: it moves slowly).
  function loadCost() {
    var slot = document.getElementById("cost");
    if (!slot) { return; }
    var url = slot.getAttribute("data-fragment");
    fetch(url, {credentials: "same-origin", cache: "no-store", headers: {"Accept": "text/html"}})
      .then(function (r) {
        if (!r.ok) { throw new Error("HTTP " + r.status); }
        return r.text();
      })
      .then(function (html) {
        slot.outerHTML = html;
        // When the chart arrived, for benchmarks/bench_dashboard.py.
        document.documentElement.dataset.costAt = String(performance.now());
      })
      .catch(function () {
        slot.removeAttribute("aria-busy");
        slot.querySelector("p").textContent = "The cost chart did not load: reload the page to try again.";
      });
  }
  if (document.readyState === "complete") { loadCost(); } else { window.addEventListener("load", loadCost); }
})();
