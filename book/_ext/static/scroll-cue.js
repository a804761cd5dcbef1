/* attn_lib book: a visible cue on every box of the article that scrolls sideways (issue 36, pages that fit a
 * phone). A code cell, a display equation, a table or a figure wider than the column scrolls inside its own box
 * (page-width.css); on a phone that box shows no scrollbar, so this script
 *   - marks it .attn-lib-scroll-x (page-width.css fades the side that hides content, and draws a thin scrollbar),
 *     with .attn-lib-at-start / .attn-lib-at-end following the scroll position;
 *   - writes a "scroll sideways" hint just above it (.attn-lib-scroll-hint, its id in the box's
 *     data-attn-lib-hint), hidden again when the box fits;
 *   - labels the cells of the card tables (a cell tagged attn-lib-cards, or table.attn-lib-cards) with their
 *     column's header (data-label), which page-width.css shows in front of each cell on a phone.
 * It runs when the page loads, when MathJax has typeset it and whenever the article changes size (a window
 * resize, a rotated phone, a widget that renders). tests/test_browser.py checks the result at 390 and 1280 px. */
(function () {
  "use strict";
  var BOX = "attn-lib-scroll-x";
  var HINT = "attn-lib-scroll-hint";
  var hints = new WeakMap();
  var listening = new WeakSet();
  var count = 0;

  function article() {
    return document.querySelector("article.bd-article") || document.querySelector("main") || document.body;
  }

  // every element of the article except the inside of MathJax's output (thousands of glyph boxes)
  function boxes(root) {
    var out = [];
    var walker = document.createTreeWalker(root, NodeFilter.SHOW_ELEMENT, {
      acceptNode: function (el) {
        if (el.classList && el.classList.contains(HINT)) return NodeFilter.FILTER_REJECT;
        var parent = el.parentElement;
        if (parent && parent.closest("mjx-container")) return NodeFilter.FILTER_REJECT;
        return NodeFilter.FILTER_ACCEPT;
      },
    });
    for (var el = walker.nextNode(); el; el = walker.nextNode()) out.push(el);
    return out;
  }

  // more than SLACK px hidden: a MathJax glyph's box may pass its formula's box by a few px (the tilde of d~, by
  // 3 px) with no ink outside it; tests/test_browser.py uses the same slack
  var SLACK = 4;
  function scrollsSideways(el, style) {
    var o = style.overflowX;
    return (o === "auto" || o === "scroll") && el.clientWidth > 0 && el.scrollWidth > el.clientWidth + SLACK;
  }

  function edges(el) {
    el.classList.toggle("attn-lib-at-start", el.scrollLeft <= 1);
    el.classList.toggle("attn-lib-at-end", el.scrollLeft + el.clientWidth >= el.scrollWidth - 1);
  }

  // the hint goes above the box, outside any flex row (div.math puts the equation number beside its
  // mjx-container), outside a code block's div.highlight (where the copy button sits) and outside a widget
  // (whose .widget-subarea should hold the widget's own views only)
  function anchorOf(el) {
    var a = el;
    while (a.parentElement && a.parentElement !== document.body) {
      var p = a.parentElement;
      var d = getComputedStyle(p).display;
      var c = p.classList;
      if (d.indexOf("flex") >= 0 || d.indexOf("inline") === 0 || c.contains("highlight") ||
          c.contains("widget-subarea") || c.contains("jupyter-widgets")) a = p;
      else break;
    }
    return a;
  }

  function cue(el, on) {
    var hint = hints.get(el);
    if (on) {
      el.classList.add(BOX);
      edges(el);
      if (!listening.has(el)) {
        el.addEventListener("scroll", function () { edges(el); }, { passive: true });
        listening.add(el);
      }
      if (!hint) {
        hint = document.createElement("span"); // a block (page-width.css), valid inside a paragraph
        hint.className = HINT;
        hint.setAttribute("aria-hidden", "true");
        hint.textContent = "scroll sideways \u2192";
        hint.id = "attn-lib-scroll-hint-" + ++count;
        el.setAttribute("data-attn-lib-hint", hint.id);
        anchorOf(el).insertAdjacentElement("beforebegin", hint);
        hints.set(el, hint);
      }
      hint.hidden = false;
    } else if (el.classList.contains(BOX)) {
      el.classList.remove(BOX, "attn-lib-at-start", "attn-lib-at-end");
      if (hint) hint.hidden = true;
    }
  }

  function labelCards(root) {
    var tables = root.querySelectorAll(".tag_attn-lib-cards table, table.attn-lib-cards");
    Array.prototype.forEach.call(tables, function (table) {
      var head = table.querySelector("thead tr");
      if (!head) return;
      // a header's note in parentheses ("cause (first model; details below)") stays in the table header only
      var names = Array.prototype.map.call(head.cells, function (c) {
        return c.innerText.trim().replace(/\s*\([^)]*\)$/, "");
      });
      Array.prototype.forEach.call(table.querySelectorAll("tbody tr"), function (row) {
        Array.prototype.forEach.call(row.cells, function (cell, i) {
          if (names[i]) cell.setAttribute("data-label", names[i]);
          cell.classList.toggle("attn-lib-empty", !cell.textContent.trim());
        });
      });
    });
  }

  function update() {
    var root = article();
    labelCards(root);
    boxes(root).forEach(function (el) {
      var style = getComputedStyle(el);
      cue(el, scrollsSideways(el, style));
    });
  }

  var pending = 0;
  function schedule() {
    if (pending) return;
    pending = window.requestAnimationFrame(function () {
      pending = 0;
      update();
    });
  }

  function start() {
    update();
    if (window.ResizeObserver) new ResizeObserver(schedule).observe(article());
    window.addEventListener("resize", schedule);
    window.addEventListener("load", schedule);
    var mj = window.MathJax;
    if (mj && mj.startup && mj.startup.promise) mj.startup.promise.then(schedule);
    else window.addEventListener("load", function () {
      var m = window.MathJax;
      if (m && m.startup && m.startup.promise) m.startup.promise.then(schedule);
    });
  }

  window.attnLibScrollCue = { update: update };
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
  else start();
})();
