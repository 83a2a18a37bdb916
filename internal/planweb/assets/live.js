// Live updates of a review page: the server pushes the review's state (Server-Sent Events)
// when the agent posts a new plan or someone decides. Everything is set as text, never HTML.
// Without JavaScript the page is the same, only not live.
(function () {
  "use strict";
  var live = document.getElementById("live");
  if (!live || !window.EventSource) { return; }
  var es = new EventSource(live.getAttribute("data-events"));
  function set(id, text) {
    var el = document.getElementById(id);
    if (el && typeof text === "string" && text !== "") { el.textContent = text; }
  }
  function say(text) {
    live.textContent = text;
    live.hidden = false;
  }
  es.addEventListener("state", function (e) {
    var s = JSON.parse(e.data);
    set("state", s.state);
    set("approvals", s.approvals);
    set("decisions", s.decisions);
    if (s.message) { say(s.message); }
    if (s.stale || !s.open || s.closed) {
      var controls = document.querySelectorAll("form.decision button, form.decision textarea");
      for (var i = 0; i < controls.length; i++) { controls[i].disabled = true; }
    }
  });
  es.addEventListener("stopped", function () {
    es.close();
    say((live.hidden ? "" : live.textContent + " ") + "The review server has stopped.");
  });
})();
