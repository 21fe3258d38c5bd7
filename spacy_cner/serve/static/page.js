// The page at GET /: the text box's entities from POST /v1/entities, in displaCy's colours (GET /v1/model
// gives them), each with its probability, its alternatives (the other spans crf_ner scored over its
// characters) on hover. No build step, no library: the text only ever enters the page as textContent.
"use strict";

let model = null;

function element(tag, className, text) {
  const node = document.createElement(tag);
  if (className) node.className = className;
  if (text !== undefined) node.textContent = text;
  return node;
}

function colour(label) {
  return (model && model.colors[label]) || "#ddd";
}

function probability(score) {
  return score === null || score === undefined ? "" : score.toFixed(3);
}

function showError(message) {
  const box = document.getElementById("error");
  box.textContent = message;
  box.hidden = !message;
}

function alternativesBox(entity, alternatives) {
  const box = element("span", "alternatives");
  box.setAttribute("role", "tooltip");
  const overlapping = alternatives.filter((alt) => alt.start < entity.end && entity.start < alt.end);
  box.appendChild(element("strong", "", `${entity.label} ${probability(entity.score)}`));
  if (!overlapping.length) {
    box.appendChild(element("div", "none", model.alternatives ? "No other reading scored." : "No alternatives kept by this pipeline."));
  }
  for (const alt of overlapping) {
    const line = element("div", "alternative");
    const swatch = element("span", "swatch");
    swatch.style.background = colour(alt.label);
    line.appendChild(swatch);
    line.appendChild(document.createTextNode(`${alt.text} ${alt.label} ${probability(alt.score)}`));
    box.appendChild(line);
  }
  return box;
}

function render(row) {
  const result = document.getElementById("result");
  const body = document.querySelector("#table tbody");
  result.replaceChildren();
  body.replaceChildren();
  const text = row.text;
  const alternatives = row.alternatives || [];
  let at = 0;
  for (const entity of row.entities) {
    result.appendChild(document.createTextNode(text.slice(at, entity.start)));
    const mark = element("mark", "entity", text.slice(entity.start, entity.end));
    mark.style.background = colour(entity.label);
    mark.tabIndex = 0;
    mark.dataset.label = entity.label;
    mark.dataset.start = entity.start;
    mark.dataset.end = entity.end;
    mark.appendChild(element("span", "label", entity.label));
    mark.appendChild(element("span", "score", probability(entity.score)));
    mark.appendChild(alternativesBox(entity, alternatives));
    result.appendChild(mark);
    at = entity.end;
    const tr = element("tr");
    tr.appendChild(element("td", "", entity.text));
    tr.appendChild(element("td", "", entity.label));
    tr.appendChild(element("td", "number", probability(entity.score)));
    tr.appendChild(element("td", "number", `${entity.start}–${entity.end}`));
    body.appendChild(tr);
  }
  result.appendChild(document.createTextNode(text.slice(at)));
  document.getElementById("table").hidden = !row.entities.length;
  if (!row.entities.length) result.appendChild(element("p", "quiet", "No entities found."));
  document.body.dataset.state = "done";
}

async function annotate() {
  const text = document.getElementById("text").value;
  document.body.dataset.state = "running";
  showError("");
  try {
    const response = await fetch("/v1/entities", {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify({ text, alternatives: Boolean(model && model.alternatives) }),
    });
    const answer = await response.json();
    if (!response.ok) throw new Error(`${response.status}: ${answer.error}`);
    render(answer);
  } catch (err) {
    showError(String(err.message || err));
    document.body.dataset.state = "error";
  }
}

async function loadModel() {
  for (;;) {
    const response = await fetch("/v1/model");
    if (response.ok) {
      model = await response.json();
      const version = model.version ? ` ${model.version}` : "";
      document.getElementById("model").textContent =
        `${model.name}${version} (${model.model}): ${model.labels.join(", ")}`;
      return;
    }
    const answer = await response.json().catch(() => ({ error: response.statusText }));
    document.getElementById("model").textContent = answer.error;
    if (response.status !== 503 || !response.headers.get("Retry-After")) throw new Error(answer.error);
    await new Promise((resolve) => setTimeout(resolve, 1000));
  }
}

document.getElementById("form").addEventListener("submit", (event) => {
  event.preventDefault();
  annotate();
});
document.getElementById("text").addEventListener("keydown", (event) => {
  if (event.key === "Enter" && (event.ctrlKey || event.metaKey)) {
    event.preventDefault();
    annotate();
  }
});

(async () => {
  const asked = new URLSearchParams(window.location.search).get("text");
  if (asked) document.getElementById("text").value = asked;
  try {
    await loadModel();
  } catch (err) {
    showError(String(err.message || err));
    return;
  }
  await annotate();
})();
