/// The page itself: plain HTML, CSS and a small script, served from the binary. The script builds every line with
/// `textContent` (a peer's names and texts are never markup) and follows the agent through server-sent events.
enum WebPage {
    /// The page's shell: nothing secret in it (it is served without a session; the script asks for one).
    static func html() -> String {
        """
        <!doctype html>
        <html lang="en">
        <head>
        <meta charset="utf-8">
        <meta name="viewport" content="width=device-width, initial-scale=1">
        <title>share</title>
        <link rel="stylesheet" href="/app.css">
        <link rel="icon" href="/favicon.ico" type="image/svg+xml">
        </head>
        <body>
        <header><h1>share</h1><span id="me"></span><span id="agent"></span></header>
        <p id="notice" role="status" class="loading">Loading…</p>
        <main hidden>
        <section id="pending"><h2>Waiting for your answer</h2><div class="list"><p class="muted loading">Loading…</p></div></section>
        <section id="send"><h2>Send</h2>
          <div id="drop" tabindex="0">Drop files here, or <label>choose them<input id="files" type="file" multiple></label></div>
          <ul id="chosen"></ul>
          <textarea id="text" rows="2" placeholder="or type a text"></textarea>
          <p>To: <span id="targets"></span></p>
          <button id="send-button">Send</button>
        </section>
        <section id="jobs"><h2>Sends</h2><div class="list"><p class="muted loading">Loading…</p></div></section>
        <section id="folders"><h2>Shared folders</h2><div class="list"><p class="muted loading">Loading…</p></div></section>
        <section id="devices"><h2>Devices</h2><table class="list"><thead><tr><th>Name</th><th>Relation</th><th>Route</th><th>Last seen</th></tr></thead><tbody></tbody></table>
          <h3>On this network</h3><div id="nearby"><p class="muted loading">Loading…</p></div></section>
        <section id="inbox"><h2>Received</h2><div id="texts"></div><div class="list"><p class="muted loading">Loading…</p></div></section>
        <section id="pair"><h2>Pair a device</h2>
          <div id="pair-start">
            <input id="pair-peer" placeholder="its name, or HOST:PORT (empty: this device waits)">
            <select id="pair-relation"><option value="trusted">trusted</option><option value="team">one of mine</option><option value="group">in a group</option></select>
            <input id="pair-group" placeholder="the group's name" hidden>
            <button id="pair-button">Pair</button>
          </div>
          <div id="pair-state"></div>
        </section>
        </main>
        <script src="/app.js"></script>
        </body>
        </html>
        """
    }

    /// Two overlapping squares, as the page's icon.
    static let icon = """
        <svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 16 16"><rect x="1" y="5" width="9" height="9" rx="2" \
        fill="#2a6f97"/><rect x="6" y="2" width="9" height="9" rx="2" fill="#61a5c2" opacity=".9"/></svg>
        """

    static let style = """
        body { font: 15px/1.4 system-ui, sans-serif; margin: 0; background: #f6f6f4; color: #222; }
        [hidden] { display: none !important; }
        header { display: flex; gap: 1em; align-items: baseline; padding: .6em 1.2em; background: #2d3b45; color: #fff; }
        header h1 { margin: 0; font-size: 1.3em; }
        #agent.off { color: #ffb4a8; }
        main { display: grid; grid-template-columns: repeat(auto-fit, minmax(380px, 1fr)); gap: 1em; padding: 1em; }
        section { background: #fff; border-radius: 8px; padding: .4em 1em 1em; box-shadow: 0 1px 3px #0002; }
        h2 { font-size: 1.05em; } h3 { font-size: .95em; color: #555; }
        .offer, .job, .item, .text { border-top: 1px solid #eee; padding: .5em 0; }
        .offer img { max-width: 160px; max-height: 120px; display: block; margin: .3em 0; border-radius: 4px; }
        .muted { color: #777; font-size: .9em; }
        progress { width: 100%; height: 1em; }
        progress[hidden], button[hidden] { display: none; }
        #drop { border: 2px dashed #9aa; border-radius: 8px; padding: 1.5em; text-align: center; color: #567; }
        #drop.over { background: #eef6f6; border-color: #388; }
        #drop input { display: none; } #drop label { text-decoration: underline; cursor: pointer; }
        textarea, #pair-peer { width: 100%; box-sizing: border-box; margin-top: .5em; }
        #pair-group[hidden] { display: none; }
        table { width: 100%; border-collapse: collapse; } td, th { text-align: left; padding: .2em .4em; }
        button { margin-right: .4em; }
        #notice { margin: .5em 1.2em 0; min-height: 1.2em; }
        #notice.error { color: #b00; }
        .code { font: 2em monospace; letter-spacing: .15em; }
        """

    static let script = #"""
        "use strict";
        // The session is a token kept in this tab's sessionStorage (per origin: another port of 127.0.0.1 cannot read
        // it, as it could a cookie) and sent as a header with every request; the secret of the printed address is
        // exchanged for it once, and leaves the address bar.
        let session = sessionStorage.getItem("share-session");
        function auth(extra) { return Object.assign({ Authorization: "Bearer " + session }, extra || {}); }
        function noSession() {
          sessionStorage.removeItem("share-session"); session = null;
          document.querySelector("main").hidden = true;
          say("no session: open the address share web printed (it carries the page's secret)", true);
        }
        const $ = (selector) => document.querySelector(selector);
        let chosen = [];
        let targets = new Set();

        function el(tag, text, attributes) {
          const node = document.createElement(tag);
          if (text !== undefined && text !== null) node.textContent = text;
          for (const [key, value] of Object.entries(attributes || {})) node.setAttribute(key, value);
          return node;
        }
        function bytes(n) {
          if (n === undefined || n === null) return "";
          const units = ["B", "KiB", "MiB", "GiB", "TiB"];
          let i = 0; while (n >= 1024 && i < units.length - 1) { n /= 1024; i++; }
          return (i ? n.toFixed(1) : n) + " " + units[i];
        }
        // "0:08" or "1:02:03", as the command line's progress says the time left.
        function duration(seconds) {
          const s = Math.round(seconds), two = (n) => String(n).padStart(2, "0");
          return s >= 3600 ? Math.floor(s / 3600) + ":" + two(Math.floor(s / 60) % 60) + ":" + two(s % 60) : Math.floor(s / 60) + ":" + two(s % 60);
        }
        function ago(date) {
          if (!date) return "never";
          const s = Math.max(0, Math.round((Date.now() - new Date(date)) / 1000));
          return s < 60 ? s + " s ago" : s < 3600 ? Math.round(s / 60) + " min ago" : Math.round(s / 3600) + " h ago";
        }
        function when(date) { return date ? new Date(date).toLocaleString() : "?"; }
        function say(text, error) { const n = $("#notice"); n.textContent = text; n.className = error ? "error" : ""; }
        async function post(url, body, type) {
          const headers = auth(type ? { "Content-Type": type } : {});
          const response = await fetch(url, { method: "POST", headers, body, credentials: "omit" });
          if (response.status === 401) noSession();
          const text = await response.text();
          if (!response.ok) throw new Error(text.trim() || response.statusText);
          return JSON.parse(text);
        }
        function act(promise) { promise.then((a) => say(a.said || "done")).catch((e) => say(e.message, true)); }
        function q(params) { return new URLSearchParams(params).toString(); }

        function render(state) {
          // The first state ends the loading state ("nothing here" is said only once it is known).
          for (const node of document.querySelectorAll(".loading")) {
            if (node.id === "notice") { node.textContent = ""; node.className = ""; } else node.remove();
          }
          $("#me").textContent = state.device.name + " · " + state.device.id.slice(0, 7);
          const agent = $("#agent");
          agent.textContent = state.agent.running ? "agent on port " + state.agent.port : "no agent runs: start one with share agent";
          agent.className = state.agent.running ? "" : "off";
          // A section is drawn again only when what it shows changed (a preview is not fetched again, a button
          // about to be clicked stays).
          if (changed("pending", state.pending)) renderPending(state.pending);
          renderJobs(state.jobs);
          if (changed("folders", [state.folders, state.folderOffers, state.declinedFolders])) renderFolders(state);
          if (changed("devices", [state.devices, state.nearby])) renderDevices(state);
          if (changed("inbox", [state.texts, state.inbox])) renderInbox(state);
          if (changed("pairing", state.pairing)) renderPairing(state.pairing);
        }
        const drawn = {};
        function changed(key, value) {
          const text = JSON.stringify(value);
          if (drawn[key] === text) return false;
          drawn[key] = text;
          return true;
        }

        function renderPending(pending) {
          const list = $("#pending .list"); list.replaceChildren();
          if (!pending.length) list.append(el("p", "Nothing waits.", { class: "muted" }));
          for (const offer of pending) {
            const box = el("div", null, { class: "offer", "data-id": offer.id });
            box.append(el("strong", offer.from), el("span", " offers " + offer.items.length + " item(s)", { class: "muted" }));
            for (const item of offer.items) {
              const line = el("div", null, { class: "offered" });
              line.append(el("span", item.title, { class: "title" }), el("span", " — " + item.kind + (item.size != null ? ", " + bytes(item.size) : ""), { class: "muted" }));
              if (item.image) {
                const image = el("img", null, { alt: "preview of " + item.title });
                fetch("/api/preview?" + q({ name: item.image }), { headers: auth(), credentials: "omit" })
                  .then((r) => r.ok ? r.blob() : null).then((b) => { if (b) image.src = URL.createObjectURL(b); });
                line.append(image);
              }
              box.append(line);
            }
            const accept = el("button", "Accept", { class: "accept" });
            accept.onclick = () => act(post("/api/pending/accept?" + q({ id: offer.id })));
            const decline = el("button", "Decline", { class: "decline" });
            decline.onclick = () => act(post("/api/pending/decline?" + q({ id: offer.id })));
            box.append(accept, decline);
            list.append(box);
          }
        }

        // Jobs change twice a second while one runs: each keeps its element, updated in place, so that a click on
        // Cancel never lands on an element that was just replaced.
        const jobViews = new Map();
        function jobView(job) {
          const box = el("div", null, { class: "job", "data-id": job.id });
          const view = { box, state: el("span", "", { class: "muted state" }), bar: el("progress"),
            detail: el("div", "", { class: "muted detail" }), error: el("div", "", { class: "muted error" }),
            cancel: el("button", "Cancel", { class: "cancel" }) };
          view.cancel.onclick = () => act(post("/api/jobs/cancel?" + q({ id: job.id })));
          box.append(el("strong", job.to), view.state, view.bar, view.detail, view.error, view.cancel);
          return view;
        }
        function renderJobs(jobs) {
          const list = $("#jobs .list");
          const shown = jobs.slice(0, 30);
          const keep = new Set(shown.map((job) => job.id));
          for (const [id, view] of jobViews) if (!keep.has(id)) { view.box.remove(); jobViews.delete(id); }
          const empty = list.querySelector(".empty");
          if (!shown.length && !empty) list.append(el("p", "No sends yet.", { class: "muted empty" }));
          if (shown.length && empty) empty.remove();
          let previous = null;
          for (const job of shown) {
            let view = jobViews.get(job.id);
            if (!view) { view = jobView(job); jobViews.set(job.id, view); }
            view.box.setAttribute("data-state", job.state);
            view.state.textContent = " " + job.state + " · " + job.summary;
            view.bar.hidden = !job.total;
            if (job.total) {
              view.bar.max = job.total;
              view.bar.value = job.bytes || 0;
              const left = job.rate && job.total >= (job.bytes || 0) ? ", " + duration((job.total - (job.bytes || 0)) / job.rate) + " left" : "";
              view.detail.textContent = (job.item || "") + " " + bytes(job.bytes) + " of " + bytes(job.total) + (job.rate ? ", " + bytes(job.rate) + "/s" + left : "");
            } else {
              view.detail.textContent = job.state === "delivered" ? job.sent : "";
            }
            // What went wrong before stays only while it still explains the state, never under a live bar.
            view.error.textContent = ["running", "delivered"].includes(job.state) ? "" : job.error || "";
            view.cancel.hidden = ["delivered", "declined", "refused", "failed", "cancelled"].includes(job.state);
            const place = previous ? previous.nextSibling : list.firstChild;
            if (view.box !== place) list.insertBefore(view.box, place);
            previous = view.box;
          }
        }

        // Each shared folder: its state, each device with when it was last in step, its conflicts and what waits;
        // then the folders offered to this device, to accept or decline.
        const openChanges = new Set();
        function renderFolders(state) {
          const list = $("#folders .list"); list.replaceChildren();
          if (!state.folders.length && !state.folderOffers.length && !(state.declinedFolders || []).length) {
            list.append(el("p", state.agent.running ? "No shared folder: share one with share sync add FOLDER --with DEVICE." : "The agent keeps shared folders: start it to see them.", { class: "muted" }));
          }
          for (const folder of state.folders) {
            const box = el("div", null, { class: "folder", "data-id": folder.settings.id, "data-state": folder.state });
            const kind = folder.settings.mirror ? "mirror" : folder.settings.kind;
            box.append(el("strong", folder.settings.label), el("span", " (" + kind + ") — " + folder.state + ", " + folder.files + " file(s), " + bytes(folder.bytes), { class: "muted state" }));
            if (folder.neededFiles > 0) {
              // The longer of the bytes at the byte rate and the files at the file rate (many small files go at the pace of their number).
              const left = folder.rate ? Math.max(folder.neededBytes / folder.rate, folder.fileRate ? folder.neededFiles / folder.fileRate : 0) : 0;
              const files = folder.fileRate >= 1 ? " (" + Math.round(folder.fileRate) + " files/s)" : "";
              box.append(el("div", folder.neededFiles + " file(s), " + bytes(folder.neededBytes) + " to come" + (folder.rate ? " at " + bytes(folder.rate) + "/s" + files + ", about " + duration(left) + " left" : ""), { class: "muted" }));
            }
            box.append(el("div", folder.settings.path, { class: "muted path" }));
            const pulls = folder.recentPulls || [];
            if (pulls.length > 0) {
              const last = pulls[pulls.length - 1];
              box.append(el("div", "last pulled from " + last.from + " " + ago(last.at) + ": " + last.files + " file(s), " + bytes(last.crossed) + " crossed, " + bytes(last.fromLocal) + " made from copies here", { class: "muted pull" }));
            }
            const peers = el("ul", null, { class: "peers" });
            for (const peer of folder.peers) {
              const why = { offered: "has not accepted this folder yet", declined: "declined this folder", paused: "paused this folder there", removed: "removed this folder there", unshared: "no longer shares this folder with this device" }[peer.notSharingWhy];
              const away = peer.notSharing ? "connected, " + (why || "not sharing this folder with this device (paused, removed or unshared there, or not accepted yet)") : "not connected" + (peer.reason ? " (" + peer.reason + ")" : "");
              const words = peer.connected ? (peer.inStep ? "in step" : "not in step yet") : away;
              peers.append(el("li", peer.name + ": " + words + (peer.connected && peer.inStep ? "" : (peer.differing != null ? ", " + peer.differing + " file(s) differ" : "") + (peer.lastInStep ? ", last in step " + ago(peer.lastInStep) : "")), { "data-peer": peer.name }));
            }
            box.append(peers);
            for (const conflict of folder.conflicts) {
              const winner = conflict.winnerName || conflict.winner, loser = conflict.loserName || conflict.loser;
              const here = conflict.winnerIsFolder ? "a folder is at the path (files were made in it on another device meanwhile); " : winner ? winner + "'s version" + (conflict.winnerTime ? " of " + when(conflict.winnerTime) : "") + " is at the path; " : "";
              box.append(el("div", "conflict: " + conflict.path + " — " + here + loser + "'s" + (conflict.loserTime ? " of " + when(conflict.loserTime) : "") + " is kept as " + conflict.copy, { class: "conflict" }));
            }
            if (folder.state.startsWith("holding")) {
              const allow = el("button", "Let the deletions go", { class: "allow-deletes" });
              allow.onclick = () => act(post("/api/folders/allow-deletes?" + q({ id: folder.settings.id })));
              box.append(allow);
            }
            const paused = folder.settings.paused === true;
            const pause = el("button", paused ? "Resume" : "Pause", { class: "pause" });
            pause.onclick = () => act(post("/api/folders/pause?" + q({ id: folder.settings.id, paused: paused ? "0" : "1" })));
            box.append(pause);
            // What another device's change replaced or removed here, kept for a while: listed on demand, each to
            // put back.
            const kept = el("button", "Versions", { class: "versions" });
            const shelf = el("ul", null, { class: "versions-list" });
            kept.onclick = async () => {
              const response = await fetch("/api/folders/versions?" + q({ id: folder.settings.id }), { headers: auth(), credentials: "omit" });
              if (response.status === 401) noSession();
              const versions = response.ok ? await response.json() : [];
              shelf.replaceChildren();
              if (!versions.length) shelf.append(el("li", "no versions kept", { class: "muted" }));
              for (const version of versions.slice(0, 200)) {
                const item = el("li", version.path + " — " + when(version.time) + ", " + bytes(version.size) + " ", { "data-path": version.path });
                const back = el("button", "Put back", { class: "restore" });
                back.onclick = () => act(post("/api/folders/restore?" + q({ id: folder.settings.id, path: version.path, at: version.time })));
                item.append(back);
                shelf.append(item);
              }
            };
            box.append(kept, shelf);
            // What the other devices changed, as it was applied here (share sync changes), newest first; a list
            // left open stays open when the folder is drawn again.
            const recent = folder.recentChanges || [];
            if (recent.length > 0) {
              const id = folder.settings.id;
              const changes = el("details", null, { class: "changes" });
              changes.open = openChanges.has(id);
              changes.ontoggle = () => { if (changes.open) openChanges.add(id); else openChanges.delete(id); };
              changes.append(el("summary", recent.length + " change(s) by other devices"));
              const listed = el("ul");
              for (const change of recent.slice().reverse()) {
                const text = when(change.at) + " — " + change.by + " " + change.action + " " + change.kind + " " + change.path
                  + (change.from ? " (was " + change.from + ")" : "")
                  + (change.keptAs ? " (this device's version kept as " + change.keptAs + ")" : "");
                listed.append(el("li", text, { "data-path": change.path, "data-action": change.action }));
              }
              changes.append(listed);
              box.append(changes);
            }
            for (const problem of folder.problems) {
              box.append(el("div", (problem.path ? problem.path + ": " : "") + problem.reason, { class: "muted problem" }));
            }
            list.append(box);
          }
          for (const offer of state.folderOffers) {
            const box = el("div", null, { class: "offer folder-offer", "data-id": offer.id });
            box.append(el("strong", offer.label), el("span", " offered by " + offer.fromName + " (" + offer.kind + ")", { class: "muted" }));
            const accept = el("button", "Accept", { class: "accept" });
            accept.onclick = () => act(post("/api/folders/accept?" + q({ id: offer.id })));
            const decline = el("button", "Decline", { class: "decline" });
            decline.onclick = () => act(post("/api/folders/decline?" + q({ id: offer.id })));
            box.append(accept, decline);
            list.append(box);
          }
          for (const offer of state.declinedFolders || []) {
            const box = el("div", null, { class: "offer folder-declined", "data-id": offer.id });
            box.append(el("strong", offer.label), el("span", " from " + offer.fromName + ", declined here", { class: "muted" }));
            const accept = el("button", "Accept after all", { class: "accept" });
            accept.onclick = () => act(post("/api/folders/accept?" + q({ id: offer.id })));
            box.append(accept);
            list.append(box);
          }
        }

        function target(name, kind) {
          const label = el("label", null, { class: "target" });
          const box = el("input", null, { type: "checkbox", value: name, "data-kind": kind });
          box.checked = targets.has(name);
          box.onchange = () => { if (box.checked) targets.add(name); else targets.delete(name); };
          label.append(box, document.createTextNode(" " + name + " "));
          return label;
        }

        function renderDevices(state) {
          const body = $("#devices tbody"); body.replaceChildren();
          const picks = $("#targets"); picks.replaceChildren();
          for (const peer of state.devices) {
            const row = el("tr", null, { "data-id": peer.id });
            row.append(el("td", peer.name), el("td", peer.relation + (peer.watch ? " (watch)" : "")), el("td", peer.route || "—"), el("td", ago(peer.lastSeen)));
            body.append(row);
            picks.append(target(peer.name, "share"));
          }
          const nearby = $("#nearby"); nearby.replaceChildren();
          if (!state.nearby.some((peer) => !peer.this)) nearby.append(el("p", "No other device heard.", { class: "muted" }));
          for (const peer of state.nearby) {
            const what = peer.this ? "this device" : peer.kind + (peer.detail ? " (" + peer.detail + ")" : "") + ", " + peer.address + ", " + ago(peer.lastSeen);
            nearby.append(el("div", peer.name + (peer.id ? " " + peer.id : "") + " — " + what, { class: "item" + (peer.this ? " this" : "") }));
            if (peer.kind === "LocalSend") picks.append(target(peer.name, "LocalSend"));
          }
          if (!picks.children.length) picks.append(el("span", "no device yet: pair one below", { class: "muted" }));
        }

        function renderInbox(state) {
          const texts = $("#texts"); texts.replaceChildren();
          for (const text of state.texts.slice(0, 20)) {
            const box = el("div", null, { class: "text" });
            box.append(el("span", text.from + ", " + ago(text.date) + ": ", { class: "muted" }), el("span", text.text, { class: "body" }));
            texts.append(box);
          }
          const list = $("#inbox .list"); list.replaceChildren();
          if (!state.inbox.length && !state.texts.length) list.append(el("p", "Nothing received yet.", { class: "muted" }));
          for (const item of state.inbox) {
            const box = el("div", null, { class: "item", "data-name": item.name, "data-from": item.from });
            box.append(el("strong", item.name), el("span", " from " + item.from + " — " + item.kind + ", " + bytes(item.size) + ", " + ago(item.modified) + " ", { class: "muted" }));
            // A file is opened or downloaded through a link made for it alone, usable once within a minute.
            const link = (text, download, extra) => {
              const a = el("a", text, Object.assign({ href: "#" }, extra || {}));
              a.onclick = (event) => {
                event.preventDefault();
                linkFor(item.from, item.name, download).then((url) => {
                  if (download) location.assign(url); else window.open(url, "_blank", "noopener");
                }).catch((e) => say(e.message, true));
              };
              return a;
            };
            if (!item.folder) {
              box.append(link("open", false, { class: "open" }), document.createTextNode(" "), link("download", true, { class: "download" }), document.createTextNode(" "));
            } else {
              box.append(link("download (.tar)", true, { class: "folder-download" }), document.createTextNode(" "));
            }
            const remove = el("button", "Remove", { class: "remove" });
            remove.onclick = () => act(post("/api/inbox/remove?" + q({ from: item.from, name: item.name })));
            box.append(remove);
            list.append(box);
          }
        }

        function renderPairing(pairing) {
          const box = $("#pair-state"); box.replaceChildren();
          box.setAttribute("data-state", pairing.state);
          if (pairing.state === "idle") return;
          if (pairing.message) box.append(el("p", pairing.message));
          if (pairing.state === "confirm") {
            box.append(el("p", "Pairing with " + pairing.peer + ". Does the other device show the same code?"), el("div", pairing.code, { class: "code" }));
            const yes = el("button", "They match", { id: "pair-yes" });
            yes.onclick = () => act(post("/api/pair/confirm?answer=yes"));
            const no = el("button", "They differ", { id: "pair-no" });
            no.onclick = () => act(post("/api/pair/confirm?answer=no"));
            box.append(yes, no);
          } else if (pairing.state !== "paired" && pairing.state !== "failed") {
            box.append(el("p", pairing.state + "…", { class: "muted" }));
          }
        }

        function choose(files) {
          for (const file of files) chosen.push(file);
          const list = $("#chosen"); list.replaceChildren();
          for (const file of chosen) list.append(el("li", file.name + " (" + bytes(file.size) + ")"));
        }
        const drop = $("#drop");
        drop.addEventListener("dragover", (e) => { e.preventDefault(); drop.classList.add("over"); });
        drop.addEventListener("dragleave", () => drop.classList.remove("over"));
        drop.addEventListener("drop", (e) => { e.preventDefault(); drop.classList.remove("over"); choose(e.dataTransfer.files); });
        $("#files").addEventListener("change", (e) => { choose(e.target.files); e.target.value = ""; });

        $("#send-button").onclick = async () => {
          const text = $("#text").value;
          const to = [...targets];
          if (!to.length) { say("pick a device to send to", true); return; }
          if (!chosen.length && !text) { say("drop a file or type a text", true); return; }
          try {
            const uploads = [];
            for (const file of chosen) {
              say("reading " + file.name + "…");
              uploads.push((await post("/api/upload?" + q({ name: file.name }), file, "application/octet-stream")).upload);
            }
            const answer = await post("/api/send", JSON.stringify({ to, uploads, text }), "application/json");
            chosen = []; $("#chosen").replaceChildren(); $("#text").value = "";
            say(answer.jobs.map((j) => "queued job " + j.job + " for " + j.to).concat(answer.errors).join("; "), answer.errors.length > 0);
          } catch (e) { say(e.message, true); }
        };

        $("#pair-button").onclick = () => {
          const peer = $("#pair-peer").value.trim();
          const relation = $("#pair-relation").value;
          const group = $("#pair-group").value.trim();
          act(post("/api/pair", JSON.stringify({ peer: peer || null, relation, group: group || null }), "application/json"));
        };
        $("#pair-relation").onchange = () => { $("#pair-group").hidden = $("#pair-relation").value !== "group"; };

        /// A one-use link to a received file (the page's session is a header, which a link cannot carry).
        async function linkFor(from, name, download) {
          const answer = await post("/api/link?" + q(Object.assign({ from, name }, download ? { download: "1" } : {})));
          return answer.url;
        }
        window.linkFor = linkFor;

        // Server-sent events read through fetch, which can send the session header (EventSource cannot).
        async function follow() {
          for (;;) {
            try {
              const response = await fetch("/api/events", { headers: auth(), credentials: "omit" });
              if (response.status === 401) { noSession(); return; }
              if ($("#notice").className === "error") say("");
              const reader = response.body.getReader();
              const decoder = new TextDecoder();
              let buffer = "";
              for (;;) {
                const { value, done } = await reader.read();
                if (done) break;
                buffer += decoder.decode(value, { stream: true });
                let end;
                while ((end = buffer.indexOf("\n\n")) >= 0) {
                  const block = buffer.slice(0, end); buffer = buffer.slice(end + 2);
                  let event = "message", data = "";
                  for (const line of block.split("\n")) {
                    if (line.startsWith("event: ")) event = line.slice(7);
                    else if (line.startsWith("data: ")) data += line.slice(6);
                  }
                  if (event === "state") render(JSON.parse(data));
                }
              }
            } catch (e) {}
            say("the page lost the agent's updates; trying again…", true);
            await new Promise((resolve) => setTimeout(resolve, 2000));
          }
        }

        async function start() {
          const secret = new URLSearchParams(location.search).get("token");
          if (secret) {
            history.replaceState(null, "", "/");
            const response = await fetch("/api/session", { method: "POST", headers: { "X-Share-Secret": secret }, credentials: "omit" });
            if (response.ok) { session = (await response.json()).session; sessionStorage.setItem("share-session", session); }
          }
          if (!session) { noSession(); return; }
          document.querySelector("main").hidden = false;
          const response = await fetch("/api/state", { headers: auth(), credentials: "omit" });
          if (response.status === 401) { noSession(); return; }
          render(await response.json());
          follow();
        }
        start();
        """#
}
