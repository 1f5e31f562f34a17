// The token chart: visible tokens over versions as a step line, compactions and rollbacks
// marked (SVG, no library).

import { fmtInt, svgEl } from "./dom.js";

const HEIGHT = 170;

export function drawChart(svg, series, onPick) {
  const width = svg.clientWidth || 800;
  const [left, right, top, bottom] = [56, 10, 8, 20];
  svg.setAttribute("viewBox", `0 0 ${width} ${HEIGHT}`);
  svg.replaceChildren();
  const points = series.points;
  if (!points.length) return;
  const first = points[0].version;
  const last = Math.max(points[points.length - 1].version, first + 1);
  const most = Math.max(...points.map((p) => p.tokens), 1);
  const x = (v) => left + ((v - first) / (last - first)) * (width - left - right);
  const y = (t) => HEIGHT - bottom - (t / most) * (HEIGHT - top - bottom);
  svg.scaleX = x;
  svg.dataset.last = String(last);
  svg.append(svgEl("line", { class: "axis", x1: left, x2: width - right, y1: HEIGHT - bottom, y2: HEIGHT - bottom }));
  svg.append(svgEl("line", { class: "axis", x1: left, x2: left, y1: top, y2: HEIGHT - bottom }));
  const label = (text, attrs) => { const t = svgEl("text", attrs); t.textContent = text; svg.append(t); };
  label(fmtInt(most), { x: left - 4, y: top + 10, "text-anchor": "end" });
  label("0", { x: left - 4, y: HEIGHT - bottom, "text-anchor": "end" });
  label(`v${fmtInt(first)}`, { x: left, y: HEIGHT - 4 });
  label(`v${fmtInt(last)}`, { x: width - right, y: HEIGHT - 4, "text-anchor": "end", class: "last-version" });
  // A step line: the total holds until the next version changes it.
  let d = "";
  points.forEach((p, i) => {
    d += i === 0 ? `M${x(p.version)},${y(p.tokens)}` : `H${x(p.version)}V${y(p.tokens)}`;
  });
  const base = y(0);
  svg.append(svgEl("path", { class: "area", d: `${d}V${base}H${x(first)}Z` }));
  svg.append(svgEl("path", { class: "line", d, "data-points": points.length }));
  for (const m of series.marks) {
    const cls = m.reverted ? "mark-reverted" : `mark-${m.type}`;
    const line = svgEl("line", { class: `mark ${cls}`, x1: x(m.version), x2: x(m.version),
      y1: top, y2: HEIGHT - bottom, "data-version": m.version, "data-type": m.type });
    const tip = svgEl("title", {});
    tip.textContent = `${m.type} at v${m.version}${m.reverted ? " (undone)" : ""}`;
    line.append(tip);
    svg.append(line);
  }
  svg.onclick = (event) => {
    const box = svg.getBoundingClientRect();
    const px = ((event.clientX - box.left) / box.width) * width;
    const v = Math.round(first + ((px - left) / (width - left - right)) * (last - first));
    onPick(Math.max(first, Math.min(last, v)));
  };
}

// The selected version's cursor on a drawn chart.
export function drawCursor(svg, version) {
  if (!svg || !svg.scaleX) return;
  svg.querySelector(".cursor")?.remove();
  const x = svg.scaleX(version);
  svg.append(svgEl("line", { class: "cursor", x1: x, x2: x, y1: 8, y2: 150 }));
}
