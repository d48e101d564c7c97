// Refresh the page's live part every few seconds without reloading it: fetch its fragment,
// swap it in, say when the data is from, and mark it stale when a refresh fails.
(function () {
  "use strict";
  var POLL_MS = 3000;
  function start() {
    var live = document.getElementById("live");
    if (!live) { return; }
    var url = live.getAttribute("data-fragment");
    var asOf = document.querySelector(".freshness .as-of time");
    var stale = document.querySelector(".freshness .stale");
    var busy = false;
    function failed() {
      stale.hidden = false;
      document.body.classList.add("is-stale");
    }
    function poll() {
      if (busy) { return; }
      busy = true;
      fetch(url, {credentials: "same-origin", cache: "no-store",
                  headers: {"Accept": "text/html"}})
        .then(function (r) {
          if (r.status === 401) { window.location.assign(live.baseURI.replace(/\/ui\/.*$/, "/ui/login")); return null; }
          if (!r.ok) { throw new Error("HTTP " + r.status); }
          return r.text();
        })
        .then(function (html) {
          if (html === null) { return; }
          live.innerHTML = html;
          var data = live.querySelector(".live-data");
          if (data && asOf) { asOf.textContent = data.getAttribute("data-as-of"); }
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
})();
