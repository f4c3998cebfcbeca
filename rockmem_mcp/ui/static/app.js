// rockmem's web page. Everything from memory is put on the page with textContent (never innerHTML): stored
// text is data, never markup or script. Every change goes through the server's services (ui/views.py).
"use strict";

const $ = (id) => document.getElementById(id);

function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (key === "class") node.className = value;
    else if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
    else if (value !== undefined && value !== null && value !== false) node.setAttribute(key, value === true ? "" : value);
  }
  for (const child of children.flat()) {
    if (child !== null && child !== undefined) node.append(child instanceof Node ? child : String(child));
  }
  return node;
}

const SVG = "http://www.w3.org/2000/svg";
function svg(tag, attrs, text) {
  const node = document.createElementNS(SVG, tag);
  for (const [key, value] of Object.entries(attrs || {})) node.setAttribute(key, value);
  if (text !== undefined) node.textContent = text;
  return node;
}

class Shown extends Error {} // an error already on the page: nothing more to report

window.addEventListener("unhandledrejection", (event) => { if (event.reason instanceof Shown) event.preventDefault(); });

function showError(message) {
  const box = $("error");
  box.textContent = message;
  box.hidden = !message;
}

async function api(path, body) {
  const options = body === undefined ? {} : {
    method: "POST",
    headers: { "content-type": "application/json", "x-rockmem-ui": "1" },
    body: JSON.stringify(body),
  };
  let response;
  try {
    response = await fetch("api/" + path, options);
  } catch {
    showError("the server is not answering (is rockmem-mcp still running?)");
    throw new Shown("no answer");
  }
  const data = await response.json().catch(() => ({ error: response.statusText }));
  if (!response.ok) {
    showError(data.error || `${response.status} ${response.statusText}`);
    throw new Shown(data.error);
  }
  showError("");
  return data;
}

function when(iso) {
  return iso ? iso.replace("T", " ").replace(/\.\d+/, "").replace("+00:00", "Z") : "";
}

// A question asked on the page before a change that cannot simply be taken back: what will change, named (texts
// as text), and a button saying what it does. Resolves true only on that button.
function confirmAction(title, parts, yes) {
  const dialog = $("confirm");
  $("confirm-title").textContent = title;
  $("confirm-body").replaceChildren(...parts);
  $("confirm-yes").textContent = yes;
  return new Promise((resolve) => {
    const finish = (answer) => {
      $("confirm-yes").removeEventListener("click", onYes);
      $("confirm-no").removeEventListener("click", onNo);
      dialog.removeEventListener("cancel", onCancel);
      if (dialog.open) dialog.close();
      resolve(answer);
    };
    const onYes = () => finish(true), onNo = () => finish(false);
    const onCancel = (event) => { event.preventDefault(); finish(false); }; // Escape
    $("confirm-yes").addEventListener("click", onYes);
    $("confirm-no").addEventListener("click", onNo);
    dialog.addEventListener("cancel", onCancel);
    dialog.showModal();
    $("confirm-no").focus();
  });
}

function quote(text) {
  return text === null || text === undefined ? el("p", { class: "gone" }, "(nothing: the item does not exist then)")
    : el("blockquote", {}, text);
}

function debounce(fn, ms) {
  let timer;
  return (...args) => { clearTimeout(timer); timer = setTimeout(() => fn(...args), ms); };
}

// ---------------------------------------------------------------------------------------------- tabs
const loaders = {};
function openTab(name) {
  for (const button of document.querySelectorAll("#tabs button")) button.classList.toggle("on", button.dataset.tab === name);
  for (const section of document.querySelectorAll(".tab")) section.classList.toggle("on", section.id === "tab-" + name);
  if (loaders[name]) loaders[name]();
}

// ---------------------------------------------------------------------------------------------- memories
let searchSerial = 0;
let lastInputAt = 0; // when the search box last changed: the benchmark times from here to the list drawn
let selected = null;
// The list as searched: its query, how far the server has given it (offset of the next page) and whether more
// is there. "Show more" (or scrolling to it) asks for the next page of the same search.
let listing = { params: null, next: 0, more: false, loading: null };

async function search() {
  const serial = ++searchSerial;
  const params = new URLSearchParams();
  const fields = { q: "q", store: "store", category: "category", tag: "tag", tier: "tier", after: "after", before: "before" };
  for (const [param, id] of Object.entries(fields)) if ($(id).value) params.set(param, $(id).value);
  if ($("archived").checked) params.set("archived", "true");
  const started = performance.now();
  const data = await api("memories?" + params);
  if (serial !== searchSerial) return; // a later search is on its way
  listing = { params, next: 0, more: false, loading: null };
  renderResults(data, false);
  const took = performance.now() - started;
  document.body.dataset.searchMs = took.toFixed(1);
  if (lastInputAt) document.body.dataset.sinceInputMs = (performance.now() - lastInputAt).toFixed(1);
  document.body.dataset.searchSerial = serial;
}

async function loadMore() {
  if (listing.loading) return listing.loading;
  if (!listing.more) return undefined;
  const serial = searchSerial;
  const params = new URLSearchParams(listing.params);
  params.set("offset", String(listing.next));
  listing.loading = (async () => {
    try {
      const data = await api("memories?" + params);
      if (serial === searchSerial) renderResults(data, true);
    } finally {
      listing.loading = null;
    }
  })();
  return listing.loading;
}

function renderResults(data, append) {
  const list = $("results");
  if (!append) list.replaceChildren();
  const known = new Set([...list.children].map((item) => item.dataset.key));
  const add = (key, item) => { // a memory saved meanwhile shifts the pages: one already listed is not repeated
    if (known.has(key)) return;
    known.add(key);
    item.dataset.key = key;
    list.append(item);
  };
  let page = 0;
  if (data.store === "memories") {
    for (const hit of data.results) {
      const entry = hit.entry;
      add(entry.id, el("li", { class: "result", "data-id": entry.id, onclick: () => openMemory(entry.id) },
        el("div", { class: "content" }, entry.content),
        el("div", { class: "meta" },
          hit.tier ? el("span", { class: "badge tier-" + hit.tier }, hit.tier) : null,
          entry.pinned ? el("span", { class: "badge" }, "pinned") : null,
          entry.archived_at ? el("span", { class: "badge" }, "archived") : null,
          entry.category || "uncategorized", " · ", (entry.tags || []).join(", "), " · ", when(entry.created_at))));
    }
    page = data.results.length;
  } else if (data.store === "episodes") {
    for (const hit of data.episodes) {
      add(hit.episode.id, el("li", { class: "result" }, el("div", {}, hit.episode.content),
        el("div", { class: "meta" }, el("span", { class: "badge" }, hit.episode.type), when(hit.episode.at))));
    }
    page = data.episodes.length;
  } else {
    for (const p of data.procedures) {
      add(p.slug || p.name, el("li", { class: "result" }, el("div", {}, p.name + (p.archived ? " (archived)" : "")),
        el("div", { class: "meta" }, (p.trigger || []).join(", "), " · v", p.version, " · ", when(p.updated_at))));
    }
    page = data.procedures.length;
  }
  listing.next = (data.offset || 0) + page;
  listing.more = Boolean(data.more);
  const shown = list.children.length;
  const total = data.more || data.store !== "episodes" ? data.total : shown; // episodes are not counted ahead
  $("result-info").textContent = `${shown} shown of ${data.more && data.store === "episodes" ? "more than " + shown : total}` +
    (data.mode ? ` · ranking ${data.mode}` : "");
  const more = $("more");
  more.hidden = !listing.more;
  const left = data.store === "episodes" ? "" : ` (${Math.max(0, data.total - shown)} more)`;
  more.textContent = `Show the next ${Number(listing.params && listing.params.get("limit")) || 50}${left}`;
}

async function openMemory(id) {
  const data = await api("memories/" + encodeURIComponent(id));
  selected = data.entry;
  for (const item of document.querySelectorAll("#results li")) item.classList.toggle("selected", item.dataset.id === id);
  const entry = data.entry;
  $("detail").hidden = false;
  $("detail-id").textContent = entry.id;
  $("detail-state").textContent = [entry.archived_at ? "archived " + when(entry.archived_at) : "live",
    entry.pinned ? "pinned" : "", `used ${entry.reinforcement_count}×`].filter(Boolean).join(" · ");
  $("edit-content").value = entry.content;
  $("edit-category").value = entry.category || "";
  $("edit-tags").value = (entry.tags || []).join(", ");
  $("edit-importance").value = entry.importance;
  $("pin").textContent = entry.pinned ? "Unpin" : "Pin";
  $("archive").hidden = Boolean(entry.archived_at);
  $("erase").dataset.id = entry.id;
  $("restore").hidden = !entry.archived_at;
  const history = $("history");
  history.replaceChildren();
  for (const version of data.history.versions || []) {
    const changes = (version.changes || []).map((c) => `${c.action} by ${c.actor}: ${c.summary}`).join("; ");
    history.append(el("li", {}, el("div", { class: "when" }, when(version.time), " ", version.commit.slice(0, 12)),
      el("div", {}, version.deleted ? "(removed)" : version.text || ""), el("div", { class: "small muted" }, changes)));
  }
  if (!(data.history.versions || []).length) {
    for (const entryLine of data.history.entries || []) {
      history.append(el("li", {}, el("div", { class: "when" }, when(entryLine.time)),
        `${entryLine.action} by ${entryLine.actor}: ${entryLine.summary}`));
    }
  }
  if (data.history.note) history.append(el("li", { class: "muted" }, data.history.note));
}

async function changeSelected(path, body) {
  if (!selected) return;
  await api(path, body);
  await openMemory(selected.id);
  await search();
}

function wireMemories() {
  const later = debounce(search, 50);
  $("q").addEventListener("input", () => { lastInputAt = performance.now(); later(); });
  for (const id of ["store", "category", "tag", "tier", "after", "before", "archived"]) $(id).addEventListener("change", later);
  $("filters").addEventListener("submit", (event) => { event.preventDefault(); search(); });
  $("save").addEventListener("click", () => {
    // Only what was changed on the page is sent, with the version it was read at: a change an agent made
    // meanwhile is refused (409), never overwritten.
    const body = { read_version: versionOf(selected) };
    const tags = $("edit-tags").value.split(",").map((t) => t.trim()).filter(Boolean);
    if ($("edit-content").value !== selected.content) body.content = $("edit-content").value;
    if ($("edit-category").value !== (selected.category || "")) body.category = $("edit-category").value;
    if (JSON.stringify(tags) !== JSON.stringify(selected.tags || [])) body.tags = tags;
    const importance = $("edit-importance").value.trim();
    if (importance !== "" && Number(importance) !== selected.importance) body.importance = Number(importance);
    if (Object.keys(body).length === 1) { showError("nothing changed"); return; }
    changeSelected("memories/" + encodeURIComponent(selected.id), body);
  });
  $("pin").addEventListener("click", () => changeSelected("memories/" + encodeURIComponent(selected.id),
    { pinned: !selected.pinned, read_version: versionOf(selected) }));
  $("archive").addEventListener("click", () => {
    if (selected.pinned && !window.confirm("This memory is pinned (in the vault). Archive it anyway?")) return;
    changeSelected("memories/" + encodeURIComponent(selected.id) + "/archive", { confirm_pinned: selected.pinned });
  });
  $("restore").addEventListener("click", () => changeSelected("memories/" + encodeURIComponent(selected.id),
    { restore: true, read_version: versionOf(selected) }));
  $("erase").addEventListener("click", eraseSelected);
  $("more").addEventListener("click", loadMore);
  // Endless scroll: the "Show more" button coming into view asks for the next page.
  new IntersectionObserver((seen) => { if (seen.some((s) => s.isIntersecting)) loadMore().catch(() => {}); })
    .observe($("more"));
  $("new").addEventListener("click", () => { $("new-memory").hidden = false; $("new-content").focus(); });
  $("new-cancel").addEventListener("click", () => { $("new-memory").hidden = true; });
  $("new-memory").addEventListener("submit", async (event) => {
    event.preventDefault();
    const body = { content: $("new-content").value, pinned: $("new-pinned").checked,
      tags: $("new-tags").value.split(",").map((t) => t.trim()).filter(Boolean) };
    if ($("new-category").value.trim()) body.category = $("new-category").value.trim();
    if ($("new-importance").value.trim() !== "") body.importance = Number($("new-importance").value);
    const entry = await api("memories", body);
    $("new-memory").reset();
    $("new-memory").hidden = true;
    await search();
    await openMemory(entry.id);
    loadCategories().catch(() => {});
  });
  $("store").addEventListener("change", () => {
    const memories = $("store").value === "memories"; // category and tier are memories' own
    for (const id of ["category", "tier"]) $(id).disabled = !memories;
  });
}

async function eraseSelected() {
  if (!selected) return;
  const entry = selected;
  const ok = await confirmAction("Delete this memory for good?", [
    quote(entry.content),
    el("p", {}, `Memory ${entry.id}` + (entry.category ? ` in ${entry.category}` : "") +
      (entry.pinned ? ", pinned (in the vault)" : "") + (entry.archived_at ? ", archived" : "") + "."),
    el("p", {}, "Its file, its vector and the episode that logged it are erased: it is not kept in the archive, " +
      "and search and recall will not find it again. The audit log and the home's git history still hold its " +
      "text."),
  ], "Delete for good");
  if (!ok) return;
  await api("memories/" + encodeURIComponent(entry.id) + "/erase", { confirm_pinned: Boolean(entry.pinned) });
  selected = null;
  $("detail").hidden = true;
  await search();
  $("result-info").textContent += ` · deleted ${entry.id} for good`;
}

function versionOf(entry) {
  return entry.updated_at || entry.created_at;
}

async function loadCategories() {
  const tree = await api("categories");
  const list = $("categories");
  list.replaceChildren(...(tree.categories || []).map((c) => el("option", { value: c.category })));
}

// ---------------------------------------------------------------------------------------------- graph
const graphState = { nodes: new Map(), edges: new Map(), start: null, overview: false };

// The graph tab opens on the busiest entities (most facts) and the facts between them; a click on one shows its
// neighbourhood.
function showOverview(data) {
  graphState.nodes.clear(); graphState.edges.clear(); graphState.start = null; graphState.overview = true;
  data.nodes.forEach((node, i) => {
    const angle = 2 * Math.PI * i / Math.max(data.nodes.length, 1);
    graphState.nodes.set(node.id, { ...node, x: 450 + 200 * Math.cos(angle), y: 280 + 200 * Math.sin(angle) });
  });
  for (const edge of data.edges) graphState.edges.set(edge.id, edge);
  $("graph-svg").dataset.view = "overview";
  $("graph-hint").textContent = data.nodes.length
    ? `The ${data.nodes.length} busiest of ${data.stats.entities} entities (${data.stats.triples} facts). Click one to see its neighbourhood.`
    : "The graph is empty.";
  layout();
  drawGraph();
}

async function showEntity(name, expand) {
  const data = await api("graph?" + new URLSearchParams({ entity: name, hops: expand ? "1" : "2" }));
  if (!expand) { graphState.nodes.clear(); graphState.edges.clear(); graphState.start = data.start; }
  graphState.overview = false;
  $("graph-svg").dataset.view = "entity";
  $("graph-hint").textContent = "Click a node to expand it.";
  for (const node of data.nodes) {
    if (!graphState.nodes.has(node.id)) {
      const anchor = graphState.nodes.get(data.start);
      graphState.nodes.set(node.id, { ...node, x: (anchor ? anchor.x : 450) + (Math.random() - 0.5) * 80,
        y: (anchor ? anchor.y : 280) + (Math.random() - 0.5) * 80 });
    }
  }
  for (const edge of data.edges) graphState.edges.set(edge.id, edge);
  layout();
  drawGraph();
}

function layout() {
  const nodes = [...graphState.nodes.values()];
  const edges = [...graphState.edges.values()];
  for (let step = 0; step < 300; step++) {
    const cool = 1 - step / 300;
    for (const a of nodes) {
      a.vx = (450 - a.x) * 0.01; a.vy = (280 - a.y) * 0.01;
      for (const b of nodes) {
        if (a === b) continue;
        const dx = a.x - b.x, dy = a.y - b.y, d2 = Math.max(dx * dx + dy * dy, 25);
        a.vx += dx / d2 * 900; a.vy += dy / d2 * 900;
      }
    }
    for (const e of edges) {
      const a = graphState.nodes.get(e.from), b = graphState.nodes.get(e.to);
      if (!a || !b) continue;
      const dx = b.x - a.x, dy = b.y - a.y, d = Math.sqrt(dx * dx + dy * dy) || 1, pull = (d - 110) * 0.05;
      a.vx += dx / d * pull; a.vy += dy / d * pull; b.vx -= dx / d * pull; b.vy -= dy / d * pull;
    }
    for (const n of nodes) {
      n.x = Math.min(880, Math.max(20, n.x + Math.max(-20, Math.min(20, n.vx)) * cool));
      n.y = Math.min(540, Math.max(20, n.y + Math.max(-20, Math.min(20, n.vy)) * cool));
    }
  }
}

function drawGraph() {
  const canvas = $("graph-svg");
  canvas.replaceChildren();
  const facts = $("graph-facts");
  facts.replaceChildren();
  for (const e of graphState.edges.values()) {
    const a = graphState.nodes.get(e.from), b = graphState.nodes.get(e.to);
    if (!a || !b) continue;
    canvas.append(svg("line", { x1: a.x, y1: a.y, x2: b.x, y2: b.y }));
    canvas.append(svg("text", { x: (a.x + b.x) / 2, y: (a.y + b.y) / 2, class: "edge-label" }, e.predicate));
    facts.append(el("li", {}, `${a.name} —${e.predicate}→ ${b.name} (${e.confidence})`));
  }
  for (const n of graphState.nodes.values()) {
    const group = svg("g", { class: "node" + (n.id === graphState.start ? " start" : ""), "data-id": n.id,
      "data-name": n.name, transform: `translate(${n.x},${n.y})` });
    group.append(svg("circle", { r: n.facts ? Math.min(18, 6 + 2 * Math.sqrt(n.facts)) : 9 }),
      svg("text", { x: 12, y: 4 }, n.name + (n.facts ? ` (${n.facts})` : "")));
    const overview = graphState.overview;
    group.addEventListener("click", () => showEntity(n.name, !overview));
    canvas.append(group);
  }
}

async function loadGraph() {
  const data = await api("graph");
  if (!graphState.nodes.size || graphState.overview) showOverview(data);
  $("entity-list").replaceChildren(...data.entities.map((hit) => {
    const entity = hit.entity || hit;
    return el("button", { type: "button", onclick: () => { $("entity").value = entity.name; showEntity(entity.name, false); } },
      entity.name);
  }));
}

// ---------------------------------------------------------------------------------------------- core
let coreVersion = null;

async function loadCore() {
  renderCore(await api("core"));
}

function showCoreTotal(view) {
  $("core-total").textContent = `${view.tokens} of ${view.cap} tokens in all` +
    (view.over_cap.length ? " · " + view.over_cap.join("; ") : "");
}

function renderCore(view) {
  coreVersion = view.version;
  showCoreTotal(view);
  const holder = $("core-blocks");
  holder.replaceChildren();
  for (const block of view.blocks) {
    const count = el("span", { class: "count" + (block.tokens > block.cap ? " over" : ""), "data-block": block.name },
      `${block.tokens} / ${block.cap} tokens`);
    const text = el("textarea", { rows: Math.max(3, block.lines.length + 1), "data-block": block.name });
    text.value = block.lines.join("\n");
    const recount = debounce(async () => {
      const measured = await api("tokens", { text: text.value });
      count.textContent = `${measured.tokens} / ${block.cap} tokens`;
      count.classList.toggle("over", measured.tokens > block.cap);
    }, 100);
    text.addEventListener("input", recount);
    const save = el("button", { type: "button", class: "primary", onclick: async () => {
      // Saved alone: what is typed in the other blocks stays on the page, unsaved.
      const saved = await api("core", { block: block.name, version: coreVersion, text: text.value });
      coreVersion = saved.version;
      showCoreTotal(saved);
      const now = saved.blocks.find((b) => b.name === block.name);
      count.textContent = `${now.tokens} / ${now.cap} tokens`;
      count.classList.toggle("over", now.tokens > now.cap);
    } }, "Save " + block.name);
    holder.append(el("div", { class: "block" }, el("h3", {}, block.name, " ", count), text, save));
  }
}

// ---------------------------------------------------------------------------------------------- working memory
let workingEntries = [];
function left(iso) {
  const seconds = Math.max(0, Math.round((Date.parse(iso) - Date.now()) / 1000));
  if (seconds === 0) return "expired";
  const h = Math.floor(seconds / 3600), m = Math.floor(seconds % 3600 / 60), s = seconds % 60;
  return (h ? h + "h" : "") + (h || m ? m + "m" : "") + s + "s";
}

async function loadWorking() {
  workingEntries = (await api("working")).entries;
  const body = document.querySelector("#working-table tbody");
  body.replaceChildren(...workingEntries.map((entry) => el("tr", {},
    el("td", {}, entry.key), el("td", { class: "value" }, el("pre", {}, entry.data)),
    el("td", {}, entry.category || ""), el("td", {}, entry.size + " B"),
    el("td", { class: "left", "data-expires": entry.expires_at }, left(entry.expires_at)))));
  $("working-empty").hidden = workingEntries.length > 0;
}
setInterval(() => { for (const cell of document.querySelectorAll("td.left")) cell.textContent = left(cell.dataset.expires); }, 1000);

// ---------------------------------------------------------------------------------------------- review
async function loadReview() {
  const data = await api("review");
  $("review-count").textContent = (data.reflections.length + data.contradictions.length + data.proposals.length) || "";
  const reflections = $("reflections");
  reflections.replaceChildren();
  if (!data.reflections.length) reflections.append(el("p", { class: "muted" }, "No reflection is waiting."));
  for (const reflection of data.reflections) reflections.append(reflectionCard(reflection));
  const contradictions = $("contradictions");
  contradictions.replaceChildren();
  if (!data.contradictions.length) contradictions.append(el("p", { class: "muted" }, "No contradiction is waiting."));
  for (const conflict of data.contradictions) contradictions.append(contradictionCard(conflict));
  const proposals = $("proposals");
  proposals.replaceChildren();
  if (!data.proposals.length) proposals.append(el("p", { class: "muted" }, "No proposal is open."));
  for (const proposal of data.proposals) proposals.append(proposalCard(proposal));
}

function reflectionCard(reflection) {
  const rows = reflection.actions.map((action) => {
    const chosen = el("input", { type: "checkbox", checked: true, "data-action": action.id });
    const fields = el("textarea", { rows: 2, "data-action": action.id, hidden: true });
    fields.value = JSON.stringify(action.item);
    const change = el("button", { type: "button", onclick: () => { fields.hidden = !fields.hidden; } }, "change");
    return { action, chosen, fields, row: el("div", { class: "action", "data-kind": action.kind },
      el("label", {}, chosen, " ", el("span", { class: "badge" }, action.kind), ` ${action.id}`,
        action.item.reason ? ` · ${action.item.reason}` : ""),
      beforeAfter(action), change, fields) };
  });
  const reason = el("input", { placeholder: "why (to reject)", class: "reason" });
  const resolve = async (decision) => {
    const body = { decision };
    if (decision === "partial") body.actions = rows.filter((r) => r.chosen.checked).map((r) => r.action.id);
    if (decision === "approve_with_changes") {
      body.edits = {};
      for (const r of rows) {
        let fields;
        try { fields = JSON.parse(r.fields.value); } catch { showError(`${r.action.id}: the changes are not JSON`); return; }
        if (JSON.stringify(fields) !== JSON.stringify(r.action.item)) body.edits[r.action.id] = fields;
      }
      body.actions = rows.filter((r) => r.chosen.checked).map((r) => r.action.id);
    }
    if (decision === "reject") body.reason = reason.value;
    await api("reflections/" + encodeURIComponent(reflection.id), body);
    await loadReview();
  };
  return el("div", { class: "card reflection", "data-id": reflection.id },
    el("h3", {}, `${reflection.id} (${reflection.trigger}, ${when(reflection.started_at)})`),
    el("details", { class: "summary" }, el("summary", {}, "The reflection's own summary"), el("pre", {}, reflection.summary)),
    ...rows.map((r) => r.row),
    el("div", { class: "buttons" },
      el("button", { type: "button", class: "primary", "data-decision": "approve", onclick: () => resolve("approve") }, "Approve all"),
      el("button", { type: "button", "data-decision": "approve_with_changes", onclick: () => resolve("approve_with_changes") },
        "Approve with changes"),
      el("button", { type: "button", "data-decision": "partial", onclick: () => resolve("partial") }, "Approve checked only"),
      reason,
      el("button", { type: "button", class: "danger", "data-decision": "reject", onclick: () => resolve("reject") }, "Reject")));
}

// A change as two columns: the memories it changes as they read now, and what it leaves (a merge: every source's
// text, then the one memory they become).
function beforeAfter(action) {
  const item = action.item;
  const memories = (action.before || []).map((m) => el("div", { class: "source", "data-id": m.id },
    el("code", {}, m.id), m.missing ? el("p", { class: "gone" }, "(gone since the reflection)") : quote(m.text)));
  const nothing = (what) => el("p", { class: "gone" }, what);
  let after;
  switch (action.kind) {
    case "merge": after = [quote(item.content)]; break;
    case "archive": after = [nothing("(archived: out of search and recall; restorable)")]; break;
    case "update": after = [...(action.before || []).map((m) => quote(m.text)),
      el("p", {}, `filed under ${item.category || "-"}` + (item.tags ? `, tags ${item.tags.join(", ")}` : ""))]; break;
    case "create": after = [quote(item.content), el("p", { class: "small muted" }, item.category || "")]; break;
    case "triple": after = [quote(`${item.subject} → ${item.predicate} → ${item.object}`)]; break;
    case "entity": after = [quote(`${item.name} (${item.type || "entity"})`)]; break;
    case "procedure": after = [quote([item.name, ...(item.steps || []).map((step, i) => `${i + 1}. ${step}`)].join("\n"))]; break;
    case "core": after = [el("p", { class: "small muted" }, item.block === "Critical Facts" ? "lines added to Critical Facts" : `${item.block}, rewritten`), quote(item.text)]; break;
    default: after = [quote(action.summary)];
  }
  return el("div", { class: "sides" },
    side("before", "Before", ...(memories.length ? memories : [nothing("(nothing: new)")])),
    side("after", "After", ...after));
}

// Two memories that contradict each other: nothing merged them; the user says which is right by archiving the other
// (restorable), or keeps both when both hold.
function contradictionCard(conflict) {
  const [first, second] = conflict.memories;
  const archive = async (loser, winner) => {
    await api("memories/" + encodeURIComponent(loser.id) + "/archive", { reason: `contradicted by ${winner.id}: the user chose it` });
    await loadReview();
  };
  const memory = (shown, other, title) => side(title === "Older" ? "before" : "after", title,
    el("div", { class: "source", "data-id": shown.id }, el("code", {}, shown.id), quote(shown.text)),
    el("button", { type: "button", class: "danger", "data-archive": shown.id, onclick: () => archive(shown, other) },
      "Archive this one"));
  return el("div", { class: "card contradiction", "data-ids": conflict.ids.join(" ") },
    el("div", {}, el("span", { class: "badge" }, "contradiction"), ` ${conflict.reason}`),
    el("div", { class: "sides" }, memory(first, second, "Older"), memory(second, first, "Newer")));
}

function proposalCard(proposal) {
  const store = el("select", { class: "store" }, ...["episodic", "semantic", "procedural", "vault"].map((name) =>
    el("option", { value: name, selected: name === proposal.store }, name)));
  const reason = el("input", { placeholder: "why", class: "reason" });
  const decide = async (action) => {
    const body = { action, reason: reason.value };
    if (action === "commit" && store.value !== proposal.store) body.store = store.value;
    await api("proposals/" + encodeURIComponent(proposal.id), body);
    await loadReview();
  };
  return el("div", { class: "card proposal", "data-id": proposal.id },
    el("div", {}, el("span", { class: "badge" }, proposal.status), `from ${proposal.from} · ${when(proposal.time)}`),
    el("div", { class: "sides" },
      side("before", proposal.before.length ? "Open proposals it contradicts" : "Before",
        ...(proposal.before.length ? proposal.before.map((p) => el("div", { class: "source", "data-id": p.id },
          el("code", {}, p.id), p.missing ? el("p", { class: "gone" }, "(decided since)") : quote(p.text)))
          : [el("p", { class: "gone" }, "(nothing: a new memory)")])),
      side("after", `After (${proposal.store})`, quote(proposal.content))),
    el("div", { class: "buttons" }, store,
      el("button", { type: "button", class: "primary", onclick: () => decide("commit") }, "Commit"),
      reason,
      el("button", { type: "button", onclick: () => decide("defer") }, "Defer"),
      el("button", { type: "button", class: "danger", onclick: () => decide("reject") }, "Reject")));
}

// ---------------------------------------------------------------------------------------------- audit
function before(iso) {
  return new Date(Date.parse(iso) - 1).toISOString();
}

// The timeline as filtered: pages follow the first one's newest line (`until`), so lines logged meanwhile do not
// shift them; "Show more" (or scrolling to it) adds the next page.
let auditing = { params: null, next: 0, more: false, loading: null };

async function loadAudit() {
  const params = new URLSearchParams({ limit: "100" });
  for (const [param, id] of [["item", "audit-item"], ["actor", "audit-actor"], ["action", "audit-action"]]) {
    if ($(id).value) params.set(param, $(id).value);
  }
  const data = await api("audit?" + params);
  if (data.until) params.set("until", data.until);
  auditing = { params, next: 0, more: false, loading: null };
  $("audit-list").replaceChildren();
  renderAudit(data);
}

async function moreAudit() {
  if (auditing.loading) return auditing.loading;
  if (!auditing.more) return undefined;
  const params = new URLSearchParams(auditing.params);
  params.set("offset", String(auditing.next));
  const mine = auditing;
  auditing.loading = (async () => {
    try {
      const data = await api("audit?" + params);
      if (mine === auditing) renderAudit(data);
    } finally {
      mine.loading = null;
    }
  })();
  return auditing.loading;
}

function renderAudit(data) {
  $("audit-list").append(...data.entries.map(auditLine));
  auditing.next = data.offset + data.entries.length;
  auditing.more = data.more;
  $("audit-more").hidden = !data.more;
  $("audit-more").textContent = `Show the next 100 (${auditing.next} shown)`;
}

function auditLine(entry) {
  const revert = el("button", { type: "button", class: "revert", onclick: () => revertChange(entry) }, "Revert this change");
  const run = /^(dream|reflection):/.test(entry.actor)
    ? el("button", { type: "button", class: "undo-run", onclick: () => undoRun(entry.actor) }, "Undo the whole run") : null;
  return el("li", { "data-file": entry.file, "data-action": entry.action },
    el("div", { class: "when" }, `${when(entry.time)} · ${entry.actor} · ${entry.approval}`),
    el("div", {}, el("b", {}, entry.action), " ", entry.file, " — ", entry.summary), revert, " ", run);
}

function side(kind, title, ...content) {
  return el("div", { class: "side " + kind }, el("h4", {}, title), ...content);
}

async function revertChange(entry) {
  const to = before(entry.time);
  const preview = await api("revert?" + new URLSearchParams({ item: entry.file, to }));
  const ok = await confirmAction(`Revert ${entry.file}?`, [
    el("p", {}, `It goes back to how it was before this change (${entry.action} by ${entry.actor}, ${when(entry.time)}); ` +
      "any later change to it is undone too. The revert is logged and can itself be undone."),
    el("div", { class: "sides" }, side("before", "Now", quote(preview.now)),
      side("after", "After the revert", quote(preview.then))),
  ], "Revert");
  if (!ok) return;
  const result = await api("revert", { item: entry.file, to });
  $("audit-item").value = "";
  await loadAudit();
  $("audit-list").prepend(el("li", { class: "done" }, `${result.revert_id}: ${result.restored.length} restored, ` +
    `${result.removed.length} removed`));
}

async function undoRun(run) {
  const preview = await api("revert?" + new URLSearchParams({ run }));
  const ok = await confirmAction(`Undo every change of ${run}?`, [
    el("p", {}, `These ${preview.changes.length}${preview.more ? "+" : ""} changes are undone: what the run changed is ` +
      "put back as it was before it, what it created is removed. The undo is logged and can itself be undone."),
    el("ul", {}, ...preview.changes.map((c) => el("li", { "data-action": c.action }, el("b", {}, c.action), ` ${c.file} — ${c.summary}`))),
  ], "Undo the run");
  if (!ok) return;
  const result = await api("revert", { run });
  await loadAudit();
  $("audit-list").prepend(el("li", { class: "done" }, `${result.revert_id}: ${result.restored.length} restored, ` +
    `${result.removed.length} removed`));
}

// ---------------------------------------------------------------------------------------------- salience
const TIER_COLOURS = { active: "#32d583", fading: "#fdb022", dormant: "#98a2b3", archive_candidate: "#f97066" };

async function loadSalience() {
  const data = await api("salience");
  const now = $("tiers-now");
  now.replaceChildren();
  const top = Math.max(1, ...Object.values(data.now));
  Object.entries(data.now).forEach(([tier, count], i) => {
    const height = 160 * count / top;
    now.append(svg("rect", { x: 40 + i * 150, y: 180 - height, width: 100, height, fill: TIER_COLOURS[tier], "data-tier": tier }),
      svg("text", { x: 40 + i * 150, y: 200 }, tier.replace("_", " ")),
      svg("text", { x: 40 + i * 150, y: 175 - height, class: "tier-count", "data-tier": tier }, String(count)));
  });
  const past = $("tiers-history");
  past.replaceChildren();
  const points = [...data.history, { at: new Date().toISOString(), tiers: data.now }];
  const most = Math.max(1, ...points.map((p) => Object.values(p.tiers).reduce((a, b) => a + b, 0)));
  const width = 560 / Math.max(points.length, 1);
  points.forEach((point, i) => {
    let y = 190;
    for (const tier of Object.keys(TIER_COLOURS)) {
      const height = 170 * (point.tiers[tier] || 0) / most;
      y -= height;
      past.append(svg("rect", { x: 50 + i * width, y, width: Math.max(width - 2, 1), height, fill: TIER_COLOURS[tier] }));
    }
  });
  past.append(svg("text", { x: 50, y: 210 }, points.length > 1 ? when(points[0].at) : "no decay pass yet: run a dream"),
    svg("text", { x: 480, y: 210 }, "now"));
  $("least").replaceChildren(...data.least.map((m) => el("li", {}, `${m.salience} ${m.tier} · ${m.preview}`)));
}

// ---------------------------------------------------------------------------------------------- start
Object.assign(loaders, { graph: loadGraph, core: loadCore, working: loadWorking, review: loadReview,
  audit: loadAudit, salience: loadSalience });

document.addEventListener("DOMContentLoaded", async () => {
  for (const button of document.querySelectorAll("#tabs button")) button.addEventListener("click", () => openTab(button.dataset.tab));
  wireMemories();
  $("graph-form").addEventListener("submit", (event) => { event.preventDefault(); showEntity($("entity").value, false); });
  $("audit-form").addEventListener("submit", (event) => { event.preventDefault(); loadAudit(); });
  $("audit-more").addEventListener("click", moreAudit);
  new IntersectionObserver((seen) => { if (seen.some((s) => s.isIntersecting)) moreAudit().catch(() => {}); })
    .observe($("audit-more"));
  const status = await api("status");
  $("home").textContent = `${status.home} · ${status.memories} memories` +
    (status.read_only ? " · read-only" : "");
  await search();
  document.body.dataset.ready = "1";
  loadCategories().catch(() => {});
  loadReview().catch(() => {});
});
