/* attn_lib book: lets the vendored Jupyter widget manager run offline. Loaded on widget pages between
 * require.js and html-manager/embed-amd.js (see nb_ipywidgets_js in _config.yml). */
(function () {
  "use strict";
  var src = (document.currentScript && document.currentScript.src) || "";
  var staticDir = src.split(/[?#]/)[0].replace(/\/[^\/]*$/, ""); // .../_static

  // 1. embed-amd.js is an AMD bundle with modules named "@jupyter-widgets/..."; webpack derives the URL of the
  //    widget CSS fonts from the module URI, which RequireJS resolves against the page's own folder unless it
  //    is told where the bundle really lives.
  if (window.require && window.require.config) {
    window.require.config({ paths: { "@jupyter-widgets/html-manager/dist": staticDir + "/html-manager" } });
  }

  // 2. ipywidgets typesets widget labels with the MathJax 2 API (MathJax.Hub.Queue); the book loads MathJax 3.
  //    MathJax is a deferred script, so install the bridge once it has run (before the widgets render on load).
  function bridgeMathJax() {
    var MJ = window.MathJax;
    if (!MJ || MJ.Hub) return;
    MJ.Hub = {
      Queue: function (job) {
        var el = Array.isArray(job) ? job[2] : undefined;
        var ready = (MJ.startup && MJ.startup.promise) || Promise.resolve();
        return ready.then(function () {
          return MJ.typesetPromise ? MJ.typesetPromise(el ? [el] : undefined) : undefined;
        });
      },
    };
  }
  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", bridgeMathJax);
  } else {
    bridgeMathJax();
  }
})();
