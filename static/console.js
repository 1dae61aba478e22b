// Toolbelt console behaviour, as a file: the console's Content-Security-Policy
// (script-src 'self') runs no inline script, event handler or eval. Loaded
// with defer on every console page, after htmx.
(function () {
  "use strict";

  // Copy buttons (the tool page's exports, a new key): shown only where the
  // clipboard API exists; each copies the text (or an input's value) of the
  // element its data-copy names.
  if (navigator.clipboard) {
    document.querySelectorAll("button.copy[data-copy]").forEach(function (b) {
      b.hidden = false;
      b.addEventListener("click", function () {
        var src = document.getElementById(b.getAttribute("data-copy"));
        navigator.clipboard.writeText(src.tagName === "INPUT" ? src.value : src.textContent).then(function () {
          b.textContent = "Copied";
          setTimeout(function () { b.textContent = "Copy"; }, 1500);
        });
      });
    });
  }

  // A polling element (data-poll, hx-trigger="every 5s": the approvals
  // queue) skips its refresh while the tab is hidden or while the reviewer
  // is inside it (focus on a reason or a button). This was an hx-trigger
  // filter, which htmx compiles with Function(), that is eval.
  document.addEventListener("htmx:beforeRequest", function (e) {
    var elt = e.detail && e.detail.elt;
    if (!elt || !elt.hasAttribute("data-poll")) return;
    if (document.visibilityState !== "visible" || elt.contains(document.activeElement)) {
      e.preventDefault();
    }
  });
})();
