// Conduit's sandbox proxy for one MCP Apps view: served at mcp-app://<token>/, an origin
// apart from the app's. It puts the view (mcp-app://<token>/view, served with the view's
// own content security policy) in an inner frame and relays the JSON-RPC messages
// between the window and the view, nothing else. Its own policy (frame-src 'self') keeps
// the inner frame on the view: it cannot be navigated elsewhere, so relaying to "*"
// reaches only the view, and upward only the app's window.
(function () {
  "use strict";
  if (window.parent === window) {
    return;
  }
  var inner = document.createElement("iframe");
  inner.setAttribute("sandbox", "allow-scripts allow-same-origin allow-forms");
  var allow = document.body.getAttribute("data-allow");
  if (allow) {
    inner.setAttribute("allow", allow);
  }
  inner.setAttribute("title", "MCP App view");
  inner.src = "view";
  document.body.appendChild(inner);
  window.addEventListener("message", function (event) {
    if (event.source === window.parent) {
      if (inner.contentWindow) {
        inner.contentWindow.postMessage(event.data, "*");
      }
    } else if (event.source === inner.contentWindow) {
      window.parent.postMessage(event.data, "*");
    }
  });
})();
