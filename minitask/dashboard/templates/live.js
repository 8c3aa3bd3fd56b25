// minitask dashboard: live listings. Every POLL_MS, while the tab is visible, read
// this page's JSON twin (/api/<listing>?<same query>) and rewrite the table's rows
// with text nodes only (never markup), each string escaped as the server's pages escape
// it (printable): a control character or a bidirectional override read from Redis shows
// as its \x / \u escape, never interpreted. Times say "3 s ago" / "in 2 min", exact on
// hover.
(function () {
  "use strict";
  var POLL_MS = 500;
  var table = document.getElementById("listing");
  if (!table) { return; }
  var kind = table.getAttribute("data-listing");
  var csrf = table.getAttribute("data-csrf");
  var skew = 0;  // server clock minus this browser's
  // what Python's str.isprintable() refuses, and the characters that move text
  var HIDDEN = /[\p{Cc}\p{Cf}\p{Cs}\p{Co}\p{Cn}\p{Zl}\p{Zp}]|(?! )\p{Zs}/u;
  function shown(value) {
    var text = value === null || value === undefined ? "" : String(value);
    var out = "";
    for (var i = 0; i < text.length; i++) {
      var code = text.codePointAt(i);
      var char = String.fromCodePoint(code);
      if (code > 0xffff) { i++; }  // a surrogate pair: two UTF-16 units
      if (char === "\n" || !HIDDEN.test(char)) { out += char; continue; }
      var hex = code.toString(16);
      out += code < 0x100 ? "\\x" + ("0" + hex).slice(-2) : code < 0x10000 ?
        "\\u" + ("000" + hex).slice(-4) : "\\U" + ("0000000" + hex).slice(-8);
    }
    return out;
  }
  // A row is not redrawn under a press of its button, nor while a button of the
  // table has the keyboard's focus: the click lands on the button pressed.
  var pressed = false;
  table.addEventListener("pointerdown", function () { pressed = true; });
  document.addEventListener("pointerup", function () {
    setTimeout(function () { pressed = false; }, 0);
  });
  function busy() {
    var focused = document.activeElement;
    return pressed || (focused && focused.tagName === "BUTTON" && table.contains(focused));
  }
  function span(seconds) {
    if (seconds > 0 && seconds < 1) { return Math.round(seconds * 1000) + " ms"; }
    var units = [["d", 86400], ["h", 3600], ["min", 60]];
    for (var i = 0; i < units.length; i++) {
      if (seconds >= units[i][1]) { return Math.floor(seconds / units[i][1]) + " " + units[i][0]; }
    }
    return Math.floor(seconds) + " s";
  }
  function ago(iso) {
    if (!iso) { return ""; }
    var seconds = (Date.parse(iso) - (Date.now() + skew)) / 1000;
    var text = span(Math.abs(seconds));
    if (text === "0 s") { return "now"; }
    return seconds > 0 ? "in " + text : text + " ago";
  }
  function cell(row, text, cls) {
    var td = document.createElement("td");
    td.textContent = shown(text);
    if (cls) { td.className = cls; }
    row.appendChild(td);
    return td;
  }
  function time(row, iso, unreadable) {
    if (unreadable) { return cell(row, "unreadable: " + unreadable, "unreadable"); }
    var td = cell(row, "");
    var t = document.createElement("time");
    t.setAttribute("datetime", iso || "");
    t.title = iso || "";
    t.textContent = ago(iso);
    td.appendChild(t);
  }
  function progress(row, p) {
    var td = cell(row, "", "progress");
    if (!p) { return; }
    if (p.total) {
      var bar = document.createElement("progress");
      bar.max = p.total;
      bar.value = p.current;
      td.appendChild(bar);
      td.appendChild(document.createTextNode(" "));
    }
    var text = String(p.current) + (p.total === null ? "" : " / " + p.total);
    td.appendChild(document.createTextNode(shown(text + (p.message ? " \u00b7 " + p.message
                                                                   : ""))));
  }
  // an action's form, as the page draws it: its POST asks to confirm on a page of its own
  function act(td, path, cls, label, id, running) {
    var form = document.createElement("form");
    form.className = "inline " + cls;
    form.method = "post";
    form.action = "/actions/" + path;
    var fields = [["csrf", csrf], ["task_id", id], ["back", "/" + kind]];
    if (running) { fields.push(["running", "1"]); }
    fields.forEach(function (field) {
      var input = document.createElement("input");
      input.type = "hidden";
      input.name = field[0];
      input.value = field[1];
      form.appendChild(input);
    });
    var button = document.createElement("button");
    button.textContent = label;
    form.appendChild(button);
    td.appendChild(form);
    td.appendChild(document.createTextNode(" "));
  }
  function actions(row, t) {
    var td = cell(row, "", "actions");
    if (kind === "running") { act(td, "cancel", "cancel", "Stop", t.task_id, true); }
    else if (kind === "scheduled") { act(td, "cancel", "cancel", "Cancel", t.task_id, false); }
    else if (t.state === "dead") {
      act(td, "requeue", "requeue", "Requeue", t.task_id, false);
      act(td, "purge-dead", "purge", "Purge", t.task_id, false);
    }
  }
  function render(data) {
    skew = Date.parse(data.now) - Date.now();
    var body = table.tBodies[0];
    var rows = document.createDocumentFragment();
    data.tasks.forEach(function (t) {
      var row = document.createElement("tr");
      row.setAttribute("data-task-id", shown(t.task_id));
      var link = document.createElement("a");
      link.href = "/task/" + encodeURIComponent(t.task_id);
      link.textContent = shown(t.task_id);
      cell(row, "").appendChild(link);
      cell(row, t.name, "name");
      cell(row, t.queue);
      if (kind === "recent") {
        cell(row, t.state, "state state-" + t.state);
        time(row, t.at);
        cell(row, t.duration === null ? "" : span(t.duration), "n");
        cell(row, t.attempt, "n");
        cell(row, t.worker);
        cell(row, t.error);
      } else {
        cell(row, t.args, "args");
        cell(row, t.attempt, "n");
        time(row, t.at, t.unreadable);
        time(row, t.enqueued_at);
        if (kind === "running") { progress(row, t.progress); }
      }
      actions(row, t);
      rows.appendChild(row);
    });
    if (!data.tasks.length) {
      var none = document.createElement("tr");
      none.className = "none";
      cell(none, "none", "muted").colSpan = 10;
      rows.appendChild(none);
    }
    body.replaceChildren(rows);
    document.getElementById("total").textContent = String(data.total);
    document.getElementById("shown").textContent = String(data.tasks.length);
    document.getElementById("live").textContent = " \u00b7 live, updated " +
      new Date().toLocaleTimeString();
  }
  function poll() {
    if (document.hidden || busy()) { return; }
    fetch("/api/" + kind + window.location.search, {credentials: "same-origin"})
      .then(function (reply) { return reply.ok ? reply.json() : null; })
      .then(function (data) { if (data && !busy()) { render(data); } })
      .catch(function () { document.getElementById("live").textContent = " \u00b7 offline"; });
  }
  setInterval(poll, POLL_MS);
}());
// A workflow's page: every WORKFLOW_MS, while the tab is visible and a step has not
// ended, read the page's JSON twin (#graph's data-api) and set each box's state:
// attributes and text only (never markup), the colours the page's legend names.
(function () {
  "use strict";
  var WORKFLOW_MS = 1000;
  var ENDED = {succeeded: true, failed: true, dead: true, cancelled: true, expired: true,
               unknown: true};
  var graph = document.getElementById("graph");
  if (!graph) { return; }
  var colors = {};
  document.querySelectorAll("#legend [data-state]").forEach(function (span) {
    colors[span.getAttribute("data-state")] = [span.getAttribute("data-fill"),
                                               span.getAttribute("data-stroke")];
  });
  function states(node, into) {
    (node.on_error || []).forEach(function (errback) { into[errback.id] = errback.state; });
    if (node.kind === "task") { into[node.id] = node.state; return; }
    var parts = node.kind === "chain" ? node.steps : node.kind === "group" ? node.members
      : node.header.concat([node.body]);
    parts.forEach(function (part) { states(part, into); });
  }
  function open() {
    return Array.prototype.some.call(graph.querySelectorAll("a.step"), function (box) {
      return !ENDED[box.getAttribute("data-state")];
    });
  }
  function render(data) {
    if (!data.workflow) { return; }
    var found = {};
    states(data.workflow.root, found);
    graph.querySelectorAll("a.step, a.errback").forEach(function (box) {
      var state = found[box.getAttribute("data-id")];
      if (!state || !colors[state] || box.getAttribute("data-state") === state) { return; }
      box.setAttribute("data-state", state);
      box.setAttribute("class", box.getAttribute("class").split(" ")[0] + " state-" + state);
      var rect = box.querySelector("rect");
      rect.setAttribute("fill", colors[state][0]);
      rect.setAttribute("stroke", colors[state][1]);
      box.querySelector("tspan.state").textContent = state;
    });
    var counts = data.workflow.counts;
    document.getElementById("counts").textContent = Object.keys(counts).sort().map(
      function (state) { return counts[state] + " " + state; }).join(", ");
    document.getElementById("live").textContent = " Live, updated " +
      new Date().toLocaleTimeString() + (open() ? "." : "; every step has ended.");
  }
  var timer = null;
  function poll() {
    if (document.hidden) { return; }
    if (!open()) { clearInterval(timer); return; }
    fetch(graph.getAttribute("data-api"), {credentials: "same-origin"})
      .then(function (reply) { return reply.ok ? reply.json() : null; })
      .then(function (data) { if (data) { render(data); } })
      .catch(function () { document.getElementById("live").textContent = " Offline."; });
  }
  if (open()) { timer = setInterval(poll, WORKFLOW_MS); }
}());
