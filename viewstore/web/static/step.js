// The step control: moving it fetches only the view rows that changed (/api/.../diff) and the
// log panel, instead of reloading the page. Event text is put in with textContent only.
(function () {
  "use strict";
  var form = document.getElementById("step");
  if (!form) { return; }
  var cid = form.dataset.cid, version = Number(form.dataset.version), seq = Number(form.dataset.seq);
  var range = document.getElementById("seq-range"), input = document.getElementById("seq-input");
  var list = document.getElementById("view"), base = "/c/" + encodeURIComponent(cid);
  var pending = 0;

  function el(tag, cls, text) {
    var node = document.createElement(tag);
    if (cls) { node.className = cls; }
    if (text !== undefined && text !== null) { node.textContent = String(text); }
    return node;
  }

  function eventNode(ev) {
    var li = el("li", "ev kind-" + ev.kind);
    li.dataset.id = ev.event_id;
    var meta = el("div", "meta");
    meta.appendChild(el("span", "pos", "#" + ev.position));
    var kind = el("a", "kind", ev.kind);
    kind.href = base + "/e/" + encodeURIComponent(ev.event_id);
    meta.appendChild(kind);
    meta.appendChild(el("span", "source", ev.source || ""));
    meta.appendChild(el("span", "time", ev.timestamp || ""));
    meta.appendChild(el("span", "eid", ev.event_id));
    li.appendChild(meta);
    ev.blocks.forEach(function (b) {
      var block = el("div", "block");
      block.appendChild(el("span", "label", b.label));
      block.appendChild(el("pre", b.mono ? "mono" : "text", b.text));
      li.appendChild(block);
    });
    return li;
  }

  function cut(position) {
    var li = el("li", "cut");
    li.dataset.pos = position;
    li.appendChild(el("span", null, "manipulation index " + position));
    return li;
  }

  function apply(diff) {
    var nodes = {};
    list.querySelectorAll("li.ev").forEach(function (li) { nodes[li.dataset.id] = li; });
    diff.removed.forEach(function (id) { if (nodes[id]) { nodes[id].remove(); delete nodes[id]; } });
    diff.added.forEach(function (ev) { nodes[ev.event_id] = eventNode(ev); });
    list.querySelectorAll("li.cut").forEach(function (li) { li.remove(); });
    var cuts = new Set(diff.manipulation_indices);
    diff.order.forEach(function (id, position) {
      if (cuts.has(position)) { list.appendChild(cut(position)); }
      var node = nodes[id];
      node.querySelector(".pos").textContent = "#" + position;
      list.appendChild(node);
    });
    if (cuts.has(diff.order.length)) { list.appendChild(cut(diff.order.length)); }
    document.getElementById("view-length").textContent = diff.order.length;
    document.getElementById("indices").textContent = diff.manipulation_indices.join(", ");
    document.getElementById("flag").hidden = !diff.unhandled_condensation_request;
  }

  function show(target) {
    var previous = Math.max(target - 1, 0), next = Math.min(target + 1, version);
    document.getElementById("seq-shown").textContent = target;
    range.value = input.value = target;
    var prev = document.getElementById("prev"), nxt = document.getElementById("next");
    prev.href = base + "?seq=" + previous; nxt.href = base + "?seq=" + next;
    prev.classList.toggle("disabled", target === 0);
    nxt.classList.toggle("disabled", target === version);
    document.title = cid + " at " + target + " · viewstore";
    history.replaceState(null, "", base + "?seq=" + target);
  }

  function go(target) {
    if (!(target >= 0 && target <= version) || target === seq) { return; }
    // A view paged over several pages has no single list to patch: load the step's page.
    if (form.dataset.windowed === "1") { window.location = base + "?seq=" + target; return; }
    var ticket = ++pending, from = seq;
    form.classList.add("loading");
    Promise.all([
      fetch("/api" + base + "/diff?from=" + from + "&to=" + target).then(function (r) {
        if (!r.ok) { throw new Error("diff " + r.status); }
        return r.json();
      }),
      fetch(base + "/log?seq=" + target).then(function (r) { return r.text(); })
    ]).then(function (results) {
      if (ticket !== pending) { return; }
      apply(results[0]);
      document.getElementById("log").innerHTML = results[1];
      seq = target;
      show(target);
      form.dataset.seq = String(target);
      form.classList.remove("loading");
    }).catch(function () { window.location = base + "?seq=" + target; });
  }

  range.addEventListener("change", function () { go(Number(range.value)); });
  range.addEventListener("input", function () { input.value = range.value; });
  form.addEventListener("submit", function (e) { e.preventDefault(); go(Number(input.value)); });
  document.getElementById("prev").addEventListener("click", function (e) { e.preventDefault(); go(seq - 1); });
  document.getElementById("next").addEventListener("click", function (e) { e.preventDefault(); go(seq + 1); });
}());
