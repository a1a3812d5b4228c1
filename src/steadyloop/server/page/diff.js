// A line diff (Myers' shortest edit script) shown as unified hunks, for the edits an approval waits on.

// The shortest edit script between two arrays of lines: [op, line] with op " " kept, "-" removed, "+" added.
export function diffLines(a, b) {
  const n = a.length, m = b.length, max = n + m;
  if (max > 20000) return [...a.map((l) => ["-", l]), ...b.map((l) => ["+", l])];  // too big to search
  const v = new Map([[1, 0]]);
  const trace = [];
  for (let d = 0; d <= max; d++) {
    trace.push(new Map(v));
    for (let k = -d; k <= d; k += 2) {
      let x = k === -d || (k !== d && v.get(k - 1) < v.get(k + 1)) ? v.get(k + 1) : v.get(k - 1) + 1;
      let y = x - k;
      while (x < n && y < m && a[x] === b[y]) { x++; y++; }
      v.set(k, x);
      if (x >= n && y >= m) return backtrack(trace, a, b, n, m);
    }
  }
  return [];
}

function backtrack(trace, a, b, n, m) {
  const out = [];
  let x = n, y = m;
  for (let d = trace.length - 1; d >= 0; d--) {
    const v = trace[d], k = x - y;
    const prevK = k === -d || (k !== d && v.get(k - 1) < v.get(k + 1)) ? k + 1 : k - 1;
    const prevX = v.get(prevK), prevY = prevX - prevK;
    while (x > prevX && y > prevY) { out.push([" ", a[x - 1]]); x--; y--; }
    if (d > 0) out.push(x === prevX ? ["+", b[--y]] : ["-", a[--x]]);
  }
  return out.reverse();
}

// The diff cut into hunks with `context` kept lines around each change, with old and new line numbers.
export function hunks(ops, context = 3) {
  const rows = [];
  let old = 1, now = 1;
  for (const [op, text] of ops) {
    rows.push({ op, text, old: op === "+" ? null : old, now: op === "-" ? null : now });
    if (op !== "+") old++;
    if (op !== "-") now++;
  }
  const keep = rows.map(() => false);
  rows.forEach((row, i) => {
    if (row.op === " ") return;
    for (let j = Math.max(0, i - context); j <= Math.min(rows.length - 1, i + context); j++) keep[j] = true;
  });
  const out = [];
  let current = null;
  rows.forEach((row, i) => {
    if (!keep[i]) { current = null; return; }
    if (!current) out.push((current = []));
    current.push(row);
  });
  return out;
}

export function diffStats(ops) {
  return { added: ops.filter(([op]) => op === "+").length, removed: ops.filter(([op]) => op === "-").length };
}
