// hb-agents-lib.js: what the box's agent helpers (hb-agent-hook, hb-agents) share:
// reading files the agent (or anything in the box) may have written, with size caps and
// checks; processes told apart across pid reuse; tmux. Installed beside them.
'use strict';

const fs = require('fs');
const path = require('path');
const {spawnSync} = require('child_process');

const FILE_MAX = 64 * 1024;
const TEXT_MAX = 300;
const PANE_LINES = 500;
const PANE_BYTES = 256 * 1024;
const home = process.env.HOME || '/data/home/agent';
const stateDir = path.join(process.env.XDG_STATE_HOME || path.join(home, '.local', 'state'),
    'hermes-box', 'agents');

// One line of plain text: control characters (escape sequences included) become spaces.
function oneLine(value, max = TEXT_MAX) {
    if (typeof value !== 'string') return '';
    const flat = value.replace(/[\u0000-\u001f\u007f-\u009f]+/g, ' ').replace(/\s+/g, ' ').trim();
    return flat.length > max ? flat.slice(0, max - 1) + '…' : flat;
}

// A small JSON file, or why it cannot be one.
function readJson(file, max = FILE_MAX) {
    let st;
    try {
        st = fs.statSync(file);
    } catch {
        return {error: 'gone'};
    }
    if (!st.isFile()) return {error: 'not a regular file'};
    if (st.size > max) return {error: `status file too large (${st.size} bytes)`};
    try {
        const value = JSON.parse(fs.readFileSync(file, 'utf8'));
        if (!value || typeof value !== 'object' || Array.isArray(value)) {
            return {error: 'status file is not a JSON object'};
        }
        return {value, mtime: st.mtimeMs / 1000};
    } catch {
        return {error: 'status file is not JSON'};
    }
}

function procStart(pid) {
    try {
        const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
        return stat.slice(stat.lastIndexOf(')') + 2).split(' ')[19] || null;
    } catch {
        return null;
    }
}

function validPid(pid) {
    return Number.isInteger(pid) && pid > 1 && pid < 4194304;
}

// Is this still the process the file names? (A pid alone may have been reused.)
function alive(pid, start) {
    if (!validPid(pid)) return false;
    const now = procStart(pid);
    return now !== null && typeof start === 'string' && now === start;
}

function num(value) {
    return typeof value === 'number' && Number.isFinite(value) && value >= 0 ? value : null;
}

function sessionId(value) {
    return typeof value === 'string' && /^[A-Za-z0-9_-]{1,100}$/.test(value) ? value : null;
}

function paneId(value) {
    return typeof value === 'string' && /^%[0-9]{1,6}$/.test(value) ? value : '';
}

function absPath(value) {
    return typeof value === 'string' && value.startsWith('/') && value.length < 4096 &&
        !/[\u0000-\u001f]/.test(value) ? value : '';
}

function tmux(socket, args) {
    const prefix = socket && fs.existsSync(socket) ? ['-S', socket] : [];
    return spawnSync('tmux', [...prefix, ...args], {encoding: 'utf8', timeout: 5000,
        maxBuffer: 4 << 20, stdio: ['ignore', 'pipe', 'pipe']});
}

function capture(pane, socket) {
    const done = tmux(socket, ['capture-pane', '-e', '-p', '-t', pane]);
    if (done.status !== 0) return null;
    let text = done.stdout;
    const lines = text.split('\n');
    if (lines.length > PANE_LINES) text = lines.slice(-PANE_LINES).join('\n');
    if (text.length > PANE_BYTES) text = text.slice(-PANE_BYTES);
    return text;
}

function writeAtomic(file, data) {
    const tmp = `${file}.${process.pid}.tmp`;
    fs.writeFileSync(tmp, data, {mode: 0o600});
    fs.renameSync(tmp, file);
}

function sleep(ms) {
    Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, ms);
}

module.exports = {
    FILE_MAX, TEXT_MAX, home, stateDir, oneLine, readJson, procStart, validPid, alive, num,
    sessionId, paneId, absPath, tmux, capture, writeAtomic, sleep,
};
