// The console's shell: sign-in, the hash router (#/overview, #/topics, #/topic/NAME,
// #/groups, #/group/NAME, #/transactions) and the poll that refreshes the open page.
import { api, onUnauthorized, setToken, signedIn } from "./api.js";
import { h, replace } from "./dom.js";
import overview from "./pages/overview.js";
import { topics, topic } from "./pages/topics.js";
import groups from "./pages/groups.js";
import group from "./pages/group.js";
import transactions from "./pages/transactions.js";

const POLL_MS = 3000;
const routes = { overview, topics, topic, groups, group, transactions };

let current = null;
let timer = null;
let generation = 0;

function route() {
  const parts = (location.hash || "#/overview").slice(2).split("/");
  const name = routes[parts[0]] ? parts[0] : "overview";
  const arg = parts.length > 1 ? decodeURIComponent(parts.slice(1).join("/")) : null;
  return { name, arg };
}

function status(text, cls) {
  const el = document.getElementById("status");
  el.textContent = text;
  el.className = "status " + (cls || "");
}

async function refresh(gen) {
  if (!current || gen !== generation) return;
  try {
    await current.refresh();
    if (gen === generation) status("updated " + new Date().toLocaleTimeString(), "");
  } catch (e) {
    if (gen === generation) status(e.message, "error");
  }
}

function schedule(gen) {
  clearTimeout(timer);
  timer = setTimeout(async () => {
    if (document.visibilityState === "visible") await refresh(gen);
    if (gen === generation) schedule(gen);
  }, POLL_MS);
}

async function open() {
  if (!signedIn()) return showLogin();
  generation += 1;
  const gen = generation;
  clearTimeout(timer);
  const { name, arg } = route();
  for (const a of document.querySelectorAll("#nav a")) {
    a.classList.toggle("active", a.dataset.page === name || a.dataset.page + "s" === name ||
      (name === "topic" && a.dataset.page === "topics") || (name === "group" && a.dataset.page === "groups"));
  }
  const main = document.getElementById("main");
  replace(main, h("p", { class: "muted" }, "loading…"));
  current = routes[name](main, arg);
  await refresh(gen);
  schedule(gen);
}

function showLogin(message) {
  clearTimeout(timer);
  current = null;
  document.getElementById("main").replaceChildren();
  document.getElementById("login").hidden = false;
  document.getElementById("logout").hidden = true;
  document.getElementById("login-error").textContent = message || "";
  document.getElementById("token").focus();
}

async function signIn(event) {
  event.preventDefault();
  const input = document.getElementById("token");
  setToken(input.value.trim());
  try {
    await api("/v1/health");
  } catch (e) {
    setToken(null);
    showLogin(e.status === 401 ? "The token was refused." : e.message);
    return;
  }
  input.value = "";
  document.getElementById("login").hidden = true;
  document.getElementById("logout").hidden = false;
  open();
}

function signOut() {
  setToken(null);
  showLogin();
}

onUnauthorized(() => {
  setToken(null);
  showLogin("The admin API refused the token (401): sign in again.");
});

document.getElementById("login-form").addEventListener("submit", signIn);
document.getElementById("logout").addEventListener("click", signOut);
window.addEventListener("hashchange", open);
if (signedIn()) {
  document.getElementById("logout").hidden = false;
  open();
} else {
  showLogin();
}
