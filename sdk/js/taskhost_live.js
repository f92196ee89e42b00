// taskhost's JavaScript SDK, its part for `taskhost dev`: a run of task 0 (`dev` and `run-once` run no
// other) that is lent the handler's own source, read only at /taskhost-dev, runs that source as it is now
// instead of the handler built into the component, so an edit is run without componentize-js's build.
// A worker lends nothing, and a queued task (its id not 0) does not even look.
//
// StarlingMonkey has neither a file API nor `import()` at run time, so the files are read through
// wasi:filesystem and each module is evaluated as a function: its `import ... from "./x.js"` lines become
// reads of the other lent modules' exports ("./sdk/taskhost.js" is the SDK in the component), its `export`s
// properties of its exports, its lines where they were. What only a build can give (a package, a WIT
// interface, `export ... from`, `import.meta`) fails the run with `dev-needs-build`, and `taskhost dev`
// builds the component again, which says what is wrong if anything is; a syntax error fails it with
// `syntax-error` and the file, line and column.
import { getDirectories } from "wasi:filesystem/preopens@0.2.12";

const LIVE = "/taskhost-dev";

/** The run's failure when the lent source needs a build: `taskhost dev` builds and runs again. */
function needsBuild(why) {
  return { code: "dev-needs-build", message: why, retryable: false };
}

/** The lent source's `handle(raw)`, or undefined when nothing is lent. `sdk` is what "./sdk/taskhost.js"
 * gives the lent modules. */
export function liveHandle(sdk) {
  const lent = getDirectories().find(([, path]) => path === LIVE);
  if (!lent) return undefined;
  const modules = new Map();
  const load = (path) => {
    let exports = modules.get(path);
    if (exports) return exports;
    const text = read(lent[0], path);
    exports = Object.create(null);
    modules.set(path, exports);
    let body;
    let source;
    try {
      source = moduleFunction(text, path);
      body = (0, eval)(source);
    } catch (e) {
      // Said here with its line (componentize-js's build says only that there is one); with
      // `--always-build`, the build reads it instead of this reading of modules.
      if (e instanceof SyntaxError && (UNREAD_SYNTAX.test(e.message) || topLevelAwait(e, source))) {
        throw needsBuild(`${path}: ${e.message}`);
      }
      if (e instanceof SyntaxError) {
        const at = `${LIVE}/${path}:${e.lineNumber}:${e.columnNumber}`;
        throw { code: "syntax-error", message: `${at}: SyntaxError: ${e.message}`, retryable: false };
      }
      throw e;
    }
    body((spec) => {
      if (!spec.startsWith("./") && !spec.startsWith("../")) {
        throw needsBuild(`${path} imports ${JSON.stringify(spec)}, which only a build brings`);
      }
      const target = join(path, spec);
      return target === "sdk/taskhost.js" ? sdk : load(target);
    }, exports, provides);
    return exports;
  };
  const app = load("app.js");
  if (typeof app.handle !== "function") throw needsBuild("app.js exports no handle function");
  return app.handle;
}

/** Whether SyntaxError `e` of the module function `source` is an `await` at its top level: the
 * module compiles as an async function (a build reads it; an `await` in a plain function is an error). */
function topLevelAwait(e, source) {
  if (!source || !/\bawait\b/.test(e.message)) return false;
  try {
    (0, eval)(source.replace("(function (", "(async function ("));
    return true;
  } catch {
    return false;
  }
}

/** The text of the file at `path` in the lent directory `dir`. */
function read(dir, path) {
  let file;
  try {
    file = dir.openAt({}, path, {}, { read: true });
  } catch (e) {
    throw needsBuild(`${path} is not among the handler's own files (${e && e.payload !== undefined ? e.payload : e})`);
  }
  // Read to its end, a piece at a time (the SDK's world has no `stat`: see wit/deps/filesystem.wit).
  const parts = [];
  let at = 0n;
  for (;;) {
    const [bytes, end] = file.read(65536n, at);
    if (bytes.length) parts.push(bytes);
    at += BigInt(bytes.length);
    if (end || !bytes.length) break;
  }
  const all = new Uint8Array(Number(at));
  let offset = 0;
  for (const p of parts) {
    all.set(p, offset);
    offset += p.length;
  }
  return new TextDecoder().decode(all);
}

/** `spec` ("./x.js", "../y.js") from the module at `from`, as a path in the lent directory. */
function join(from, spec) {
  const parts = from.split("/").slice(0, -1);
  for (const part of spec.split("/")) {
    if (part === "..") parts.pop();
    else if (part !== "." && part !== "") parts.push(part);
  }
  return parts.join("/");
}

// An import's clause exactly (a default, a `{...}` list, `* as ns`), so no text in a comment reads as one.
const CLAUSE = String.raw`(?:[\w$]+\s*,\s*)?(?:\{[^}]*\}|\*\s*as\s+[\w$]+)|[\w$]+`;
const IMPORT_FROM = new RegExp(String.raw`^[ \t]*import\s*(${CLAUSE})\s*from\s*(["'])([^"'\n]+)\2[ \t]*;?`, "gm");
const IMPORT_BARE = /^[ \t]*import\s*(["'])([^"'\n]+)\1[ \t]*;?/gm;
const EXPORT_LIST = /^[ \t]*export\s*\{([^}]*)\}[ \t]*;?/gm;
const EXPORT_DECLARED = /^([ \t]*)(export\s+(?:default\s+)?)((?:async\s+)?function\b\s*\*?\s*([\w$]*)|class\b\s*([\w$]*)|(?:const|let|var)\s+([\w$]+))/gm;
const EXPORT_DEFAULT = /^([ \t]*)export\s+default\s+/gm;
const EXPORT_BINDING = /^[ \t]*export\s+(?:const|let|var)\s/gm;
// What a build reads and this does not: re-exports, an exported pattern, import.meta.
const UNREAD = /^[ \t]*(export\s*\*|export\s*\{[^}]*\}\s*from|export\s+(?:const|let|var)\s*[[{])|\bimport\.meta\b/m;
// A SyntaxError about these is this reading's (an import not at a line's start, import attributes): the
// build reads the module instead. One about `await` is a top-level await only if the module compiles as
// an async function.
const UNREAD_SYNTAX = /\b(import|export|with)\b/;

/** `text` replaced by `to`, with as many lines, so every line of the module stays where it was. */
function sameLines(text, to) {
  return to.replace(/\n/g, " ") + "\n".repeat((text.match(/\n/g) || []).length);
}

/** `text` as spaces, its line breaks kept: what stood there is gone, every column where it was. */
function blank(text) {
  return text.replace(/[^\n]/g, " ");
}

/** Whether the `export const|let|var` at `at` in `text` declares several names (a comma outside
 * brackets and strings, before the statement's end), which this reading would export only the first of. */
function declaresSeveral(text, at) {
  const close = { "(": ")", "[": "]", "{": "}" };
  const open = [];
  for (let i = at; i < text.length; i++) {
    const c = text[i];
    if (c === '"' || c === "'" || c === "`") {
      for (i++; i < text.length && text[i] !== c; i++) if (text[i] === "\\") i++;
    } else if (c === "/" && text[i + 1] === "/") {
      while (i < text.length && text[i] !== "\n") i++;
      i--;
    } else if (close[c]) open.push(close[c]);
    else if (open.length && c === open[open.length - 1]) open.pop();
    else if (!open.length && (c === ";" || c === "\n")) return false;
    else if (!open.length && c === ",") return true;
  }
  return false;
}

/** Throws as a build would when module `m` (from `spec`) does not export each of `names`. */
function provides(m, names, spec) {
  for (const name of names) {
    if (!(name in m)) throw new SyntaxError(`the module ${JSON.stringify(spec)} does not provide an export named ${JSON.stringify(name)}`);
  }
  return m;
}

/** The source of a function `(importOf, exports) => void` that evaluates the module `text`. */
function moduleFunction(text, path) {
  const unread = text.match(UNREAD);
  if (unread) throw needsBuild(`${path}: ${unread[0].trim()} is read only by a build`);
  for (const m of text.matchAll(EXPORT_BINDING)) {
    if (declaresSeveral(text, m.index + m[0].length)) throw needsBuild(`${path}: an export declaring several names is read only by a build`);
  }
  const names = []; // [exported, local]
  let n = 0;
  const body = text
    .replace(IMPORT_FROM, (all, clause, _q, spec) => {
      clause = clause.replace(/\/\*[\s\S]*?\*\/|\/\/[^\n]*/g, " ");
      const m = `__taskhost_m${n++}`;
      const wanted = [];
      let take = "";
      for (let part of clause.split(/,(?![^{]*\})/)) {
        part = part.trim();
        if (part.startsWith("*")) take += ` const ${part.replace(/^\*\s*as\s+/, "")} = ${m};`;
        else if (part.startsWith("{")) {
          const list = part.slice(1, -1).split(",").map((x) => x.trim()).filter(Boolean);
          wanted.push(...list.map((x) => x.split(/\s+as\s+/)[0]));
          take += ` const { ${list.map((x) => x.replace(/^([\w$]+)\s+as\s+([\w$]+)$/, "$1: $2")).join(", ")} } = ${m};`;
        } else if (part) {
          wanted.push("default");
          take += ` const ${part} = ${m}.default;`;
        }
      }
      const from = `__taskhost_provides(__taskhost_import(${JSON.stringify(spec)}), ${JSON.stringify(wanted)}, ${JSON.stringify(spec)})`;
      return sameLines(all, `const ${m} = ${from};${take}`);
    })
    .replace(IMPORT_BARE, (all, _q, spec) => sameLines(all, `__taskhost_import(${JSON.stringify(spec)});`))
    .replace(EXPORT_LIST, (all, list) => {
      for (const item of list.split(",").map((x) => x.trim()).filter(Boolean)) {
        const [local, exported = local] = item.split(/\s+as\s+/);
        names.push([exported.trim(), local.trim()]);
      }
      return sameLines(all, "");
    })
    .replace(EXPORT_DECLARED, (all, indent, exported, declaration, fn, cls, binding) => {
      const isDefault = /default/.test(exported);
      // A declaration stays one (hoisted, its name bound in the module); a nameless default is named.
      let name = fn || (cls !== "extends" && cls) || binding;
      if (!name) {
        if (cls === "extends") declaration = "class extends";
        name = "__taskhost_default";
        declaration = declaration.replace(/(function\s*\*?|class)(\s*)(extends)?$/, (_d, kw, _s, ext) => `${kw} ${name}${ext ? " extends" : ""}`);
      }
      names.push([isDefault ? "default" : name, name]);
      return indent + blank(exported) + declaration;
    })
    // `__taskhost_d = ` is as wide as `export default `; its getter is there from the start (a cycle).
    .replace(EXPORT_DEFAULT, (all, indent) => {
      names.push(["default", "__taskhost_d"]);
      return `${indent}__taskhost_d = ${blank(all.slice(indent.length + 15))}`;
    });
  // One getter a name (a declaration in a comment may repeat one).
  const getters = [...new Map(names)]
    .map(([exported, local]) => `Object.defineProperty(__taskhost_exports, ${JSON.stringify(exported)}, { enumerable: true, get: () => ${local} });`)
    .join(" ");
// All on the first line: the module's own lines keep their numbers in errors' stacks.
  return `(function (__taskhost_import, __taskhost_exports, __taskhost_provides) { "use strict"; let __taskhost_d; ${getters} ${body}\n})\n//# sourceURL=${LIVE}/${path}`;
}
