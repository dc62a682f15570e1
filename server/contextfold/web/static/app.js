(function () {
  "use strict";
  var root = document.documentElement;
  try { var saved = localStorage.getItem("contextfold-theme"); if (saved) root.dataset.theme = saved; } catch (e) {}
  function toggleTheme() {
    var dark = root.dataset.theme ? root.dataset.theme === "dark" : matchMedia("(prefers-color-scheme: dark)").matches;
    root.dataset.theme = dark ? "light" : "dark";
    try { localStorage.setItem("contextfold-theme", root.dataset.theme); } catch (e) {}
  }
  var button = document.getElementById("theme");
  if (button) button.addEventListener("click", toggleTheme);

  // Open the element a link's #anchor names (an event's details, a message).
  function openTarget() {
    if (!location.hash) return;
    var el = document.getElementById(decodeURIComponent(location.hash.slice(1)));
    if (!el) return;
    var d = el.tagName === "DETAILS" ? el : el.querySelector("details");
    if (d) d.open = true;
    for (var p = el.parentElement; p; p = p.parentElement) if (p.tagName === "DETAILS") p.open = true;
    el.scrollIntoView({ block: "start" });
  }
  window.addEventListener("hashchange", openTarget);
  openTarget();

  // Keys: / search, t theme, j/k next/previous message, o open or fold it.
  var current = -1;
  document.addEventListener("keydown", function (ev) {
    var t = ev.target;
    if (ev.ctrlKey || ev.metaKey || ev.altKey) return;
    if (t && (t.tagName === "INPUT" || t.tagName === "SELECT" || t.tagName === "TEXTAREA")) return;
    var items = document.querySelectorAll(".msg");
    if (ev.key === "/") {
      var s = document.querySelector("[data-search]");
      if (s) { ev.preventDefault(); s.focus(); s.select(); }
    } else if (ev.key === "t") {
      toggleTheme();
    } else if ((ev.key === "j" || ev.key === "k") && items.length) {
      if (items[current]) items[current].classList.remove("kbd");
      current = Math.max(0, Math.min(items.length - 1, current + (ev.key === "j" ? 1 : -1)));
      items[current].classList.add("kbd");
      var focusable = items[current].querySelector("summary, a");
      if (focusable) focusable.focus();
      items[current].scrollIntoView({ block: "nearest" });
    } else if (ev.key === "o" && items[current]) {
      var d = items[current].querySelector("details");
      if (d) d.open = !d.open;
    }
  });

  // Sign-in: the token goes into a cookie for this server, then the page loads again.
  var signin = document.getElementById("signin");
  if (signin) signin.addEventListener("submit", function (ev) {
    ev.preventDefault();
    var token = document.getElementById("token").value.trim();
    document.cookie = "contextfold_token=" + encodeURIComponent(token) + "; path=/; SameSite=Strict";
    location.reload();
  });

  // Live: ask whether the session changed; when it did, swap in the page's fresh content.
  var live = document.body.dataset.live;
  if (live) {
    var revision = null;
    var every = Math.max(parseFloat(document.body.dataset.poll) || 2, 0.2) * 1000;
    var tick = function () {
      fetch(live, { credentials: "same-origin", cache: "no-store" }).then(function (r) {
        return r.ok ? r.json() : null;
      }).then(function (now) {
        if (!now) return;
        if (revision !== null && now.revision !== revision) {
          return fetch(location.href, { credentials: "same-origin", cache: "no-store" }).then(function (r) { return r.text(); }).then(function (text) {
            var fresh = new DOMParser().parseFromString(text, "text/html").getElementById("live-region");
            var here = document.getElementById("live-region");
            if (fresh && here) {
              var open = Array.prototype.map.call(here.querySelectorAll("details[open]"), function (d) { return d.parentElement && d.parentElement.id; });
              here.replaceWith(fresh);
              open.forEach(function (id) { var li = id && document.getElementById(id); var d = li && li.querySelector("details"); if (d) d.open = true; });
            }
          });
        }
        revision = now.revision;
      }).catch(function () {}).then(function () { setTimeout(tick, every); });
    };
    tick();
  }
})();
