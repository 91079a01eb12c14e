// The teachers' sign-in: the admin key goes to POST /api/signin once, as a bearer header, and the
// server answers with an HttpOnly, SameSite=Strict cookie. The key is kept nowhere on the page.
// `?next=` names the page to go back to, and only a path of this server is followed.

const form = document.getElementById("signin");
const error = document.getElementById("error");

function next() {
  const wanted = new URLSearchParams(location.search).get("next") || "/view/lobby.html";
  return wanted.startsWith("/") && !wanted.startsWith("//") ? wanted : "/view/lobby.html";
}

form.addEventListener("submit", async (event) => {
  event.preventDefault();
  const input = document.getElementById("key");
  const key = input.value;
  input.value = "";
  const response = await fetch("/api/signin", { method: "POST", headers: { authorization: `Bearer ${key}` } });
  if (response.ok) {
    location.replace(next());
    return;
  }
  error.textContent = response.status === 401 ? "That is not this server's admin key." : `HTTP ${response.status}`;
  error.hidden = false;
});
