// Open a flame graph page (write_flamegraph's HTML) in headless Chromium and try it as a
// person would: the frames drawn (and the names they show), a click on a frame (it must fill
// the width), a search (the matching frames highlighted, the matched share shown), a tooltip;
// and any request for something that is not the page itself.  Prints one JSON object; exits 0 unless Chromium
// could not be driven (the checks are the caller's).
//
//   node tests/node/flamegraph_check.mjs PAGE.html SEARCH [SCREENSHOT.png]
//
// Needs playwright-core (tests/node/package.json: npm ci --prefix tests/node) and Chromium
// (/usr/bin/chromium, or CHROMIUM=path).
import { chromium } from "playwright-core";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { pathToFileURL } from "node:url";

const [page_path, search, screenshot] = process.argv.slice(2);
// The result on one line of ASCII, for a reader that splits lines at U+0085, U+2028 and
// U+2029 too (Python's str.splitlines): JSON.stringify leaves them as they are in names.
const report = (value) =>
  console.log(JSON.stringify(value).replace(
    /[\u007f-\uffff]/g, (c) => "\\u" + c.charCodeAt(0).toString(16).padStart(4, "0")));
const url = pathToFileURL(resolve(page_path)).href;
const profile = mkdtempSync(join(tmpdir(), "flamegraph-check-"));
const result = { url, foreign_requests: [], errors: [] };
let context;
try {
  context = await chromium.launchPersistentContext(profile, {
    executablePath: process.env.CHROMIUM || "/usr/bin/chromium",
    headless: true,
    viewport: { width: 1200, height: 800 },
    args: [
      "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
      "--disable-background-networking", "--disable-component-update", "--disable-sync",
    ],
  });
  const page = context.pages()[0] || (await context.newPage());
  page.on("request", (request) => {
    if (request.url() !== url) result.foreign_requests.push(request.url());
  });
  page.on("pageerror", (error) => result.errors.push(String(error)));
  page.on("console", (message) => {
    if (message.type() === "error") result.errors.push(message.text());
  });
  await page.goto(url, { waitUntil: "load" });
  await page.waitForFunction(() => window.flamegraph !== undefined);
  const canvas = await page.$("canvas");
  // The root is at the bottom: scroll there, and measure the canvas in the viewport.
  await page.evaluate(() => window.scrollTo(0, document.body.scrollHeight));
  let box = await canvas.boundingBox();
  result.canvas = { width: box.width, height: box.height };
  const frames = await page.evaluate(() => window.flamegraph.frames());
  result.frames_drawn = frames.length;
  result.first_frames = frames.slice(0, 3);
  result.names_drawn = [...new Set(frames.map((f) => f.name))];
  // Click the widest frame two levels above the root that is not full width.
  const rowOf = (frame) => Math.round((box.height - frame.y) / 17);
  const candidates = frames.filter((f) => rowOf(f) >= 3 && f.width < box.width * 0.9 && f.width > 20);
  candidates.sort((a, b) => b.width - a.width);
  if (candidates.length) {
    const target = candidates[0];
    result.clicked = target;
    await page.evaluate((y) => window.scrollBy(0, y), box.y + target.y - 400);
    box = await canvas.boundingBox();
    await page.mouse.move(box.x + target.x + target.width / 2, box.y + target.y + 8);
    result.tooltip = await page.evaluate(() => {
      const tip = document.getElementById("tooltip");
      return { shown: getComputedStyle(tip).display !== "none", text: tip.textContent };
    });
    await page.mouse.click(box.x + target.x + target.width / 2, box.y + target.y + 8);
    result.zoomed = await page.evaluate(() => window.flamegraph.zoomed());
    const after = await page.evaluate(() => window.flamegraph.frames());
    const same = after.find((f) => f.node === target.node);
    result.zoomed_frame = same || null;
    result.frames_after_zoom = after.length;
    await page.click("#reset");
    result.zoomed_after_reset = await page.evaluate(() => window.flamegraph.zoomed());
  }
  if (search) {
    await page.fill("#search", search);
    result.matched_text = await page.textContent("#matched");
    result.matched_share = await page.evaluate(() => window.flamegraph.matchedShare());
    const highlighted = await page.evaluate(() => window.flamegraph.frames().filter((f) => f.matched));
    result.highlighted = highlighted.length;
    result.highlighted_names = [...new Set(highlighted.map((f) => f.name))].slice(0, 10);
    // The pixel in the middle of a highlighted frame is the highlight's magenta.
    if (highlighted.length) {
      const f = highlighted.sort((a, b) => b.width - a.width)[0];
      result.highlight_pixel = await page.evaluate(([x, y]) => {
        const canvas = document.querySelector("canvas");
        const scale = canvas.width / canvas.clientWidth;
        const pixel = canvas.getContext("2d").getImageData(Math.floor(x * scale), Math.floor(y * scale), 1, 1).data;
        return Array.from(pixel);
      }, [f.x + Math.min(f.width / 2, 2), f.y + 2]);
    }
  }
  if (screenshot) {
    await page.fill("#search", "");
    await page.evaluate(() => window.scrollTo(0, document.body.scrollHeight));
    await page.screenshot({ path: screenshot, fullPage: false });
  }
} catch (error) {
  result.errors.push(String(error && error.stack ? error.stack : error));
  report(result);
  process.exitCode = 2;
} finally {
  if (context) await context.close();
  rmSync(profile, { recursive: true, force: true });
}
if (!process.exitCode) report(result);
