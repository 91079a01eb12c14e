// The watch page's two charts, drawn with uPlot (the global from vendor/uPlot-*.iife.min.js, which
// watch.html loads first): happiness over the mood bands with the stage changes marked, and
// Ramesh's quote against the learner's offers, turn by turn.

import { MOODS, stageColor } from "./common.js";
import { model } from "./watch-state.js";

const $ = (id) => document.getElementById(id);

let happinessPlot = null;
let pricePlot = null;

function xRange(_u, _min, max) {
  const last = Math.max(model.state ? model.state.turn : 0, max || 0);
  return [0, Math.max(5, last + 1)];
}

const xAxis = {
  incrs: [1, 2, 5, 10, 20, 50, 100],
  values: (_u, splits) => splits.map((v) => (Number.isInteger(v) ? v : "")),
  grid: { stroke: "#e5e7eb" },
  font: "14px system-ui, sans-serif",
  size: 34,
};

function drawBands(u) {
  const { ctx, bbox } = u;
  const dpr = devicePixelRatio || 1;
  ctx.save();
  for (const band of MOODS) {
    const top = u.valToPos(band.hi, "y", true);
    const bottom = u.valToPos(band.lo, "y", true);
    ctx.fillStyle = `${band.color}26`; // about 15 % opacity
    ctx.fillRect(bbox.left, top, bbox.width, bottom - top);
    ctx.fillStyle = band.color;
    ctx.font = `700 ${13 * dpr}px system-ui, sans-serif`;
    ctx.textAlign = "left";
    ctx.textBaseline = "middle";
    ctx.fillText(band.name, bbox.left + bbox.width + 8 * dpr, (top + bottom) / 2);
  }
  ctx.restore();
}

function drawStageMarks(u) {
  const { ctx, bbox } = u;
  const dpr = devicePixelRatio || 1;
  ctx.save();
  ctx.setLineDash([5 * dpr, 4 * dpr]);
  ctx.lineWidth = 2 * dpr;
  ctx.font = `600 ${11 * dpr}px system-ui, sans-serif`;
  ctx.textBaseline = "top";
  ctx.textAlign = "left";
  for (const change of model.stages) {
    const x = u.valToPos(change.turn, "x", true);
    if (x < bbox.left || x > bbox.left + bbox.width) continue;
    ctx.strokeStyle = stageColor(change.to);
    ctx.beginPath();
    ctx.moveTo(x, bbox.top);
    ctx.lineTo(x, bbox.top + bbox.height);
    ctx.stroke();
    ctx.fillStyle = stageColor(change.to);
    ctx.fillText(change.to, x + 3 * dpr, bbox.top + 2 * dpr);
  }
  ctx.restore();
}

function chartWidth(id) {
  return Math.max(280, $(id).clientWidth);
}

function makeCharts() {
  happinessPlot = new uPlot({
    width: chartWidth("happiness-chart"),
    height: 210,
    padding: [12, 112, 0, 0], // room on the right for the mood names
    legend: { show: false },
    cursor: { drag: { x: false, y: false }, points: { size: 10 } },
    scales: { x: { time: false, range: xRange }, y: { range: [0, 100] } },
    axes: [
      xAxis,
      {
        splits: () => [0, 20, 40, 60, 80, 100],
        grid: { stroke: "#0000" },
        font: "14px system-ui, sans-serif",
        size: 56,
      },
    ],
    series: [
      {},
      {
        label: "happiness",
        stroke: "#111827",
        width: 3,
        points: { show: true, size: 9, fill: "#ffffff", width: 2.5 },
      },
    ],
    hooks: { drawClear: [drawBands], draw: [drawStageMarks] },
  }, [[], []], $("happiness-chart"));

  pricePlot = new uPlot({
    width: chartWidth("price-chart"),
    height: 210,
    padding: [12, 112, 0, 0], // the same plot width as the happiness chart, so turns line up
    legend: { show: false },
    cursor: { drag: { x: false, y: false }, points: { size: 10 } },
    scales: {
      x: { time: false, range: xRange },
      y: { range: (_u, _min, max) => [0, Math.max(50, Math.ceil(((max || 0) * 1.15) / 10) * 10)] },
    },
    axes: [
      xAxis,
      {
        values: (_u, splits) => splits.map((v) => `₹${v}`),
        grid: { stroke: "#e5e7eb" },
        font: "14px system-ui, sans-serif",
        size: 56,
      },
    ],
    series: [
      {},
      {
        label: "quote",
        stroke: "#b45309",
        width: 3,
        spanGaps: true,
        paths: uPlot.paths.stepped({ align: 1 }),
        points: { show: true, size: 9, fill: "#b45309" },
      },
      {
        label: "offer",
        stroke: "#2563eb",
        width: 0,
        paths: () => null,
        points: { show: true, size: 12, fill: "#2563eb", width: 2, stroke: "#ffffff" },
      },
    ],
  }, [[], [], []], $("price-chart"));

  const resize = new ResizeObserver(() => {
    happinessPlot.setSize({ width: chartWidth("happiness-chart"), height: 210 });
    pricePlot.setSize({ width: chartWidth("price-chart"), height: 210 });
  });
  resize.observe($("happiness-chart"));
  resize.observe($("price-chart"));
}

export function renderCharts() {
  if (!happinessPlot) makeCharts();
  const turns = [...model.happiness.keys()].sort((a, b) => a - b);
  happinessPlot.setData([turns, turns.map((t) => model.happiness.get(t))]);
  $("happiness-chart").dataset.points = String(turns.length);

  const priceTurns = [...new Set([...model.quotes.keys(), ...model.offers.keys()])]
    .sort((a, b) => a - b);
  pricePlot.setData([
    priceTurns,
    priceTurns.map((t) => (model.quotes.has(t) ? model.quotes.get(t) : null)),
    priceTurns.map((t) => (model.offers.has(t) ? model.offers.get(t) : null)),
  ]);
  const price = $("price-chart");
  price.dataset.quotes = String(model.quotes.size);
  price.dataset.offers = String(model.offers.size);
}
