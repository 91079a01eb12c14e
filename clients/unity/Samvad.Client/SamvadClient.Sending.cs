// SamvadClient, sending: the frames the client sends (scene, transcript, ping, resume). Frames that
// must arrive are tracked as PendingFrame until acknowledged; the rest go out once, if connected.

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
        /// event; nothing changes. Kept and re-sent until acknowledged, like every frame.</summary>
        public PendingFrame Repeat(string id = null, Action<AckResult> onAck = null)
        {
            return Command("repeat", id, onAck);
        }

        /// <summary>The `stop` command: the session ends now (outcome "stopped"), followed by the
        /// learner report (<see cref="Report"/>).</summary>
        public PendingFrame Stop(string id = null, Action<AckResult> onAck = null)
        {
            return Command("stop", id, onAck);
        }

        PendingFrame Command(string name, string id, Action<AckResult> onAck)
        {
            id = CheckId(id, "c");
            var frame = new JObject();
            frame["type"] = "command";
            frame["id"] = id;
            frame["name"] = name;
            return Track(new PendingFrame(id, "command", frame.ToString(Formatting.None), onAck));
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
                if (frame.Reply != null) _awaitingReply[frame.Id] = frame;
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
