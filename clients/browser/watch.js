// The watch page: one session, read-only, live. This entry reads ?session= and ?token=, publishes
// the test hooks as window.samvadView and starts the socket. The page is split into ES modules:
//
//   watch-state.js   the model of the session, the counters tests read, and the pure updates
//   watch-socket.js  the spectator socket: welcome, resume, the seq rules, reconnects
//   watch-render.js  the header, conversation, stages, timings and outcome
//   watch-charts.js  the happiness and price charts (uPlot)
//   watch-coaching.js  hints, undos, barge-ins and repeats between the lines, reply marks, flags
//                    in plain words (flags.js), and the report's coaching counts and clamps
//   watch-voice.js   with ?voice=1: Ramesh's voice and a mouth moving with it (his visemes)

import { dropSocket, start } from "./watch-socket.js";
import { setStatus, showFatal } from "./watch-render.js";
import { view } from "./watch-state.js";
import { setUpVoice } from "./watch-voice.js";

const params = new URLSearchParams(location.search);
const sessionId = params.get("session") || "";
const token = params.get("token") || "";

view.dropSocket = dropSocket;
window.samvadView = view;

if (!sessionId || !token) {
  setStatus("failed", "no session");
  showFatal("This page needs ?session=ID&token=SPECTATOR_TOKEN. Get a link from the lobby.");
} else {
  setUpVoice();
  start(sessionId, token);
}
