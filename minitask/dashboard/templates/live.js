// minitask dashboard: live listings. Every POLL_MS, while the tab is visible, read
// this page's JSON twin (/api/<listing>?<same query>) and rewrite the table's rows
// with text nodes only (never markup). Times say "3 s ago" / "in 2 min", exact on hover.
(function () {
  "use strict";
  var POLL_MS = 500;
  var table = document.getElementById("listing");
  if (!table) { return; }
  var kind = table.getAttribute("data-listing");
  var csrf = table.getAttribute("data-csrf");
  var skew = 0;  // server clock minus this browser's
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
    td.textContent = text === null || text === undefined ? "" : String(text);
    if (cls) { td.className = cls; }
    row.appendChild(td);
    return td;
  }
  function time(row, iso) {
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
    td.appendChild(document.createTextNode(text + (p.message ? " \u00b7 " + p.message : "")));
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
      row.setAttribute("data-task-id", t.task_id);
      var link = document.createElement("a");
      link.href = "/task/" + encodeURIComponent(t.task_id);
      link.textContent = t.task_id;
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
        time(row, t.at);
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
