// The conversation list's "new events" note: the change feed's entries that commit after the
// page was opened, streamed by /api/feed/follow (Server-Sent Events). The note only counts
// them; following its link reloads the list. Text goes in with textContent only.
(function () {
  "use strict";
  var note = document.getElementById("feed-news");
  if (!note || !window.EventSource) { return; }
  var link = note.querySelector("a");
  var events = 0, conversations = {};
  var source = new EventSource("/api/feed/follow");

  source.onopen = function () { note.dataset.following = "yes"; };

  function plural(n, word) { return n + " " + word + (n === 1 ? "" : "s"); }

  source.onmessage = function (message) {
    var entry;
    try { entry = JSON.parse(message.data); } catch (error) { return; }
    events += 1;
    conversations[entry.conversation_id] = true;
    link.textContent = plural(events, "new event") + " in " +
      plural(Object.keys(conversations).length, "conversation") + ": reload";
    note.hidden = false;
  };
  // A dropped stream reconnects by itself (from the last entry's id); a refused one stays shut.
})();
