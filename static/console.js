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

  // Tabs (the tool page): a [data-tabs] box holds a hidden tablist whose
  // tabs name their panels (aria-controls). Without this script every
  // panel shows in turn; with it one at a time, as the ARIA tabs pattern
  // asks: arrow keys, Home and End move between tabs, the selected tab is
  // the one in the tab order, and the address's #fragment (a panel, or
  // something inside one such as #try-result) or a field marked invalid
  // selects its panel.
  document.querySelectorAll("[data-tabs]").forEach(function (box) {
    var list = box.querySelector('[role="tablist"]');
    if (!list) return;
    var tabs = Array.prototype.slice.call(list.querySelectorAll('[role="tab"]'));
    var panels = tabs.map(function (t) { return document.getElementById(t.getAttribute("aria-controls")); });
    if (!tabs.length || panels.indexOf(null) >= 0) return;
    function select(i, focus) {
      tabs.forEach(function (t, j) {
        t.setAttribute("aria-selected", i === j ? "true" : "false");
        t.tabIndex = i === j ? 0 : -1;
        panels[j].hidden = i !== j;
      });
      if (focus) tabs[i].focus();
    }
    function holding(el) {
      for (var j = 0; el && j < panels.length; j++) {
        if (panels[j].contains(el)) return j;
      }
      return -1;
    }
    function fromAddress() {
      var id = decodeURIComponent(location.hash.slice(1));
      return id ? holding(document.getElementById(id)) : -1;
    }
    panels.forEach(function (p, j) {
      p.setAttribute("role", "tabpanel");
      p.setAttribute("aria-labelledby", tabs[j].id);
    });
    tabs.forEach(function (t, i) {
      t.addEventListener("click", function () {
        select(i, false);
        history.replaceState(null, "", "#" + panels[i].id);
      });
    });
    list.addEventListener("keydown", function (e) {
      var i = tabs.indexOf(document.activeElement);
      if (i < 0) return;
      var next = { ArrowRight: i + 1, ArrowLeft: i - 1, Home: 0, End: tabs.length - 1 }[e.key];
      if (next === undefined) return;
      e.preventDefault();
      next = (next + tabs.length) % tabs.length;
      select(next, true);
      history.replaceState(null, "", "#" + panels[next].id);
    });
    window.addEventListener("hashchange", function () {
      var i = fromAddress();
      if (i >= 0) select(i, false);
    });
    var first = fromAddress();
    if (first < 0) first = holding(box.querySelector('[aria-invalid="true"]'));
    select(Math.max(first, 0), false);
    list.hidden = false;
  });

  // A polling element (data-poll, hx-trigger="every 5s": the approvals
  // queue) skips its refresh while the tab is hidden or while the reviewer
  // is inside it: focus on a reason or a button, or the pointer over it
  // (a card must not move under a click about to land). This was an
  // hx-trigger filter, which htmx compiles with Function(), that is eval.
  document.addEventListener("htmx:beforeRequest", function (e) {
    var elt = e.detail && e.detail.elt;
    if (!elt || !elt.hasAttribute("data-poll")) return;
    if (document.visibilityState !== "visible" || elt.contains(document.activeElement) || elt.matches(":hover")) {
      e.preventDefault();
    }
  });

  // In the approvals queue, with focus in a call's card (not in its reason),
  // "a" approves and "d" denies it: the card's own buttons, so the reason
  // and the checks are the same as a click's.
  document.addEventListener("keydown", function (e) {
    if (e.ctrlKey || e.metaKey || e.altKey || e.repeat) return;
    var key = e.key.toLowerCase();
    if (key !== "a" && key !== "d") return;
    var target = e.target;
    if (target && (target.tagName === "TEXTAREA" || target.tagName === "INPUT" || target.isContentEditable)) return;
    var card = target && target.closest && target.closest("article.approval");
    if (!card) return;
    var button = card.querySelector(key === "a" ? "[data-testid^='approve-']" : "[data-testid^='deny-']");
    if (!button) return;
    e.preventDefault();
    button.click();
  });
})();
