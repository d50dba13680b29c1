// The session's binding: the launch redirect hands it to the page in the URL fragment, which no
// server sees; the page keeps it in this origin's storage, which a server on another port cannot
// read, and sends it with every data request beside the cookie. A cookie replayed from another
// port without it reaches no data.
"use strict";

const BIND = (() => {
  const key = "cotal_bind";
  const fromURL = new URLSearchParams(location.hash.slice(1)).get("bind");
  if (fromURL) {
    localStorage.setItem(key, fromURL);
    history.replaceState(null, "", location.pathname + location.search);
  }
  return localStorage.getItem(key) || "";
})();

// bound returns fetch options carrying the binding.
function bound(opts) {
  const o = Object.assign({ credentials: "same-origin" }, opts || {});
  o.headers = Object.assign({ "X-Cotal-Bind": BIND }, o.headers || {});
  return o;
}

// boundFeed opens the live feed with the binding (EventSource sets no headers).
function boundFeed() {
  return new EventSource("/feed?bind=" + encodeURIComponent(BIND));
}
