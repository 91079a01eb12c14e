// SamvadClient, sending: the frames the client sends (scene, transcript, the commands, playback,
// silence, ping, resume). Frames that must arrive are tracked as PendingFrame until acknowledged
// and re-sent with the same id after every reconnect; the rest go out once, if connected.

using System;
using System.Threading.Tasks;
using Newtonsoft.Json;
using Newtonsoft.Json.Linq;

namespace Samvad.Client
{
    public sealed partial class SamvadClient
    {
        /// <summary>Tell the server what the learner holds (null when they let go). Never makes the vendor speak.</summary>
        public PendingFrame SendScene(string objectGrabbed, string objectInView = null, string inputLanguage = null,
                                      string targetLanguage = null, string id = null, Action<AckResult> onAck = null)
        {
            id = CheckId(id, "scene");
            var frame = new JObject();
            frame["type"] = "scene";
            frame["id"] = id;
            frame["object_grabbed"] = objectGrabbed; // null is meaningful: nothing in hand
            if (objectInView != null) frame["object_in_view"] = objectInView;
            if (inputLanguage != null) frame["input_language"] = inputLanguage;
            if (targetLanguage != null) frame["target_language"] = targetLanguage;
            return Track(new PendingFrame(id, "scene", frame.ToString(Formatting.None), onAck));
        }

        /// <summary>One final learner utterance: one turn. Kept and re-sent until acknowledged;
        /// <see cref="PendingFrame.Reply"/> completes with the vendor's answer.</summary>
        public PendingFrame SendTranscript(string text, double? confidence = null, string language = null,
                                           string id = null, Action<AckResult> onAck = null)
        {
            if (text == null) throw new ArgumentNullException("text");
            if (confidence.HasValue && (confidence.Value < 0.0 || confidence.Value > 1.0))
                throw new ArgumentOutOfRangeException("confidence", "confidence is between 0 and 1");
            id = CheckId(id, "t");
            var frame = new JObject();
            frame["type"] = "transcript";
            frame["id"] = id;
            frame["text"] = text;
            frame["final"] = true;
            if (confidence.HasValue) frame["confidence"] = confidence.Value;
            if (language != null) frame["language"] = language;
            return Track(new PendingFrame(id, "transcript", frame.ToString(Formatting.None), onAck));
        }

        /// <summary>The `repeat` command: the vendor's last line again, as a <see cref="Repeated"/>
        /// event; nothing changes. Kept and re-sent until acknowledged, like every frame. Before the
        /// vendor has said anything it is refused with `nothing_to_repeat`.</summary>
        public PendingFrame Repeat(string id = null, Action<AckResult> onAck = null)
        {
            return Command("repeat", id, onAck);
        }

        /// <summary>The `hint` command: help for the learner's next line, as a <see cref="HintReceived"/>
        /// event (and <see cref="PendingFrame.Answer"/>). Each hint in the same turn goes one level
        /// further: 0 contextual, 1 structural (a sentence frame), 2 and above reveal (a whole line).
        /// Nothing changes, no brain is asked. Sent while a turn is in flight, it waits for that turn's
        /// reply and is about the next line.</summary>
        public PendingFrame Hint(string id = null, Action<AckResult> onAck = null)
        {
            return Command("hint", id, onAck);
        }

        /// <summary>The `undo` command: takes back the learner's last answered turn. The
        /// <see cref="Undone"/> event carries the session exactly as before that turn, and
        /// <see cref="State"/> becomes it. Up to 3 turns back in a row; then, or before any turn, it
        /// is refused with `nothing_to_undo`. Sent while a turn is in flight, it takes that turn back
        /// once answered.</summary>
        public PendingFrame Undo(string id = null, Action<AckResult> onAck = null)
        {
            return Command("undo", id, onAck);
        }

        /// <summary>The `stop` command: the session ends now (outcome "stopped"), followed by the
        /// learner report (<see cref="Report"/>).</summary>
        public PendingFrame Stop(string id = null, Action<AckResult> onAck = null)
        {
            return Command("stop", id, onAck);
        }

        /// <summary>The `playback` frame: how much of the vendor's reply to learner turn
        /// <paramref name="turn"/> the learner heard, in characters of that reply's text.
        /// <paramref name="interrupted"/> true: the learner cut in (barge-in) after
        /// <paramref name="heardChars"/> characters; false: heard to the end (heardChars = the text's
        /// length; the server's silence timer starts from now). Send it for turn replies only, never
        /// for a reply with a <see cref="ReplyEvent.Mark"/>. A price the vendor named only in the
        /// unheard part does not bind; the <see cref="Heard"/> event says so. Refused with
        /// `unknown_turn` (a turn not answered, or undone) or `heard_out_of_range`.</summary>
        public PendingFrame ReportPlayback(int turn, int heardChars, bool interrupted, string id = null,
                                           Action<AckResult> onAck = null)
        {
            if (turn < 0) throw new ArgumentOutOfRangeException("turn", "a turn is 0 or more");
            if (heardChars < 0) throw new ArgumentOutOfRangeException("heardChars", "heardChars is 0 or more");
            id = CheckId(id, "pb");
            var frame = new JObject();
            frame["type"] = "playback";
            frame["id"] = id;
            frame["turn"] = turn;
            frame["heard_chars"] = heardChars;
            frame["interrupted"] = interrupted;
            return Track(new PendingFrame(id, "playback", frame.ToString(Formatting.None), onAck, answered: true));
        }

        /// <summary>The `silence` frame: the game's own voice detection decided the learner gave up.
        /// Handled as a silence timeout: the vendor nudges (<see cref="NudgeReceived"/>), or after
        /// MAX_CONSECUTIVE_TIMEOUTS in a row the session ends as `timed_out`. The server also keeps
        /// its own timer; this only says it sooner.</summary>
        public PendingFrame Silence(string id = null, Action<AckResult> onAck = null)
        {
            id = CheckId(id, "sil");
            var frame = new JObject();
            frame["type"] = "silence";
            frame["id"] = id;
            return Track(new PendingFrame(id, "silence", frame.ToString(Formatting.None), onAck));
        }

        PendingFrame Command(string name, string id, Action<AckResult> onAck)
        {
            id = CheckId(id, "c");
            var frame = new JObject();
            frame["type"] = "command";
            frame["id"] = id;
            frame["name"] = name;
            // stop is answered by session.ended and the report, which name no frame
            return Track(new PendingFrame(id, "command", frame.ToString(Formatting.None), onAck, answered: name != "stop"));
        }

        /// <summary>A partial (non-final) transcript, for live captions on spectators' screens. The server
        /// neither applies nor acknowledges these, so they are sent once, only while connected.</summary>
        public bool SendPartialTranscript(string text, double? confidence = null, string language = null)
        {
            if (text == null) throw new ArgumentNullException("text");
            var frame = new JObject();
            frame["type"] = "transcript";
            frame["id"] = NewId("p");
            frame["text"] = text;
            frame["final"] = false;
            if (confidence.HasValue) frame["confidence"] = Math.Max(0.0, Math.Min(1.0, confidence.Value));
            if (language != null) frame["language"] = language;
            lock (_gate)
            {
                if (!_live || _current == null) return false;
                _current.Enqueue(frame.ToString(Formatting.None));
                _stats.FramesSent++;
                return true;
            }
        }

        /// <summary>An application ping; completes with the pong (its RttMs set).</summary>
        public Task<PongEvent> PingAsync()
        {
            var done = new TaskCompletionSource<PongEvent>(TaskCreationOptions.RunContinuationsAsynchronously);
            lock (_gate)
            {
                if (!_live || _current == null)
                {
                    done.TrySetException(new InvalidOperationException("not connected"));
                    return done.Task;
                }
                string id = SendPingLocked(_current);
                _pings[id] = done;
            }
            return done.Task;
        }

        PendingFrame Track(PendingFrame frame)
        {
            lock (_gate)
            {
                if (_stoppedBecause != null)
                {
                    frame.Fail(_stoppedBecause);
                    return frame;
                }
                _unacked.Add(frame);
                if (frame.ExpectsAnswer) _awaitingReply[frame.Id] = frame;
                if (_live && _current != null)
                {
                    // Queued behind anything re-sent on this connection: the original order holds.
                    _current.Enqueue(frame.Json);
                    frame.Attempts++;
                    _stats.FramesSent++;
                }
            }
            return frame;
        }

        static string CheckId(string id, string prefix)
        {
            if (id == null) return NewId(prefix);
            if (id.Length < 1 || id.Length > 64) throw new ArgumentException("an id is 1 to 64 characters", "id");
            foreach (char c in id)
            {
                if (c < '!' || c > '~') throw new ArgumentException("an id is printable ASCII without spaces", "id");
            }
            return id;
        }

        /// <summary>A fresh frame id: prefix, a dash and 32 hex digits (at most 64 characters).</summary>
        public static string NewId(string prefix)
        {
            string guid = Guid.NewGuid().ToString("N");
            if (string.IsNullOrEmpty(prefix)) return guid;
            if (prefix.Length > 31) prefix = prefix.Substring(0, 31);
            return prefix + "-" + guid;
        }

        string SendPingLocked(Connection conn)
        {
            string id = "ping-" + (++_pingNumber);
            var frame = new JObject();
            frame["type"] = "ping";
            frame["id"] = id;
            frame["t"] = Math.Round(_clock.Elapsed.TotalMilliseconds, 3);
            conn.Enqueue(frame.ToString(Formatting.None));
            return id;
        }

        void SendResumeLocked(Connection conn)
        {
            _resumeId = NewId("resume");
            _seq.ResumeOutstanding = true;
            var frame = new JObject();
            frame["type"] = "resume";
            frame["id"] = _resumeId; // the server acks it after the replay: then the resume is over
            frame["last_seq"] = _seq.LastSeq;
            conn.Enqueue(frame.ToString(Formatting.None));
            _stats.ResumesSent++;
        }
    }
}
