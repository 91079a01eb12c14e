// SamvadClient, receiving: one server frame at a time, under the lock. `welcome` starts (or resumes)
// the stream and re-sends what is unacknowledged; acks settle pending frames; sequenced events go
// through SeqTracker and are folded into the client's SessionState. Handlers run after the lock.

using System;
using System.Collections.Generic;
using System.IO;
using System.Threading.Tasks;
using Newtonsoft.Json;
using Newtonsoft.Json.Linq;

namespace Samvad.Client
{
    public sealed partial class SamvadClient
    {
        void Handle(Connection conn, string text)
        {
            JObject frame;
            try
            {
                using (var reader = new JsonTextReader(new StringReader(text)))
                {
                    reader.DateParseHandling = DateParseHandling.None;
                    frame = JObject.Load(reader);
                }
            }
            catch (JsonException ex)
            {
                LogLine("unreadable server frame: " + ex.Message);
                return;
            }
            string type = (string)frame["type"];
            var after = new List<Action>();
            try
            {
                switch (type)
                {
                    case "welcome": OnWelcome(conn, frame.ToObject<WelcomeEvent>(), after); break;
                    case "ack": OnAck(conn, frame.ToObject<AckEvent>(), after); break;
                    case "pong": OnPong(frame.ToObject<PongEvent>(), after); break;
                    case "error": OnError(conn, frame.ToObject<ErrorEvent>(), after); break;
                    case "reply.delta":
                        var delta = frame.ToObject<ReplyDeltaEvent>();
                        after.Add(() => { var h = ReplyDelta; if (h != null) h(delta); });
                        break;
                    case "reply.withdrawn":
                        var withdrawn = frame.ToObject<ReplyWithdrawnEvent>();
                        after.Add(() => { var h = ReplyWithdrawn; if (h != null) h(withdrawn); });
                        break;
                    case "reply.audio":
                        var audio = frame.ToObject<ReplyAudioEvent>();
                        after.Add(() => { var h = ReplyAudio; if (h != null) h(audio); });
                        break;
                    case "reply": OnSequenced(conn, frame.ToObject<ReplyEvent>(), after); break;
                    case "mood": OnSequenced(conn, frame.ToObject<MoodEvent>(), after); break;
                    case "stage": OnSequenced(conn, frame.ToObject<StageEvent>(), after); break;
                    case "session.ended": OnSequenced(conn, frame.ToObject<SessionEndedEvent>(), after); break;
                    case "snapshot": OnSequenced(conn, frame.ToObject<SnapshotEvent>(), after); break;
                    case "tips": OnSequenced(conn, frame.ToObject<TipsEvent>(), after); break;
                    case "session.report": OnSequenced(conn, frame.ToObject<SessionReportEvent>(), after); break;
                    case "repeat": OnSequenced(conn, frame.ToObject<RepeatEvent>(), after); break;
                    case "hint": OnSequenced(conn, frame.ToObject<HintEvent>(), after); break;
                    case "undo": OnSequenced(conn, frame.ToObject<UndoEvent>(), after); break;
                    case "heard": OnSequenced(conn, frame.ToObject<HeardEvent>(), after); break;
                    case "speech": OnSequenced(conn, frame.ToObject<SpeechEvent>(), after); break;
                    case "speech.partial": OnSequenced(conn, frame.ToObject<SpeechPartialEvent>(), after); break;
                    default:
                        LogLine("ignoring server frame of unknown type " + type);
                        break;
                }
            }
            catch (JsonException ex)
            {
                LogLine("ill-typed " + type + " frame: " + ex.Message);
            }
            foreach (var action in after)
            {
                Raise(action);
            }
        }

        void OnWelcome(Connection conn, WelcomeEvent welcome, List<Action> after)
        {
            lock (_gate)
            {
                if (_current != conn) return;
                conn.Welcomed = true;
                bool first = _seq.Start(welcome.Seq);
                welcome.IsReconnect = !first;
                _role = welcome.Role;
                if (first)
                {
                    _state = welcome.State;
                }
                else
                {
                    // The events we missed come through `resume`, in order, so none is skipped
                    // or applied twice; the welcome's own state is not folded in.
                    _stats.Reconnects++;
                    SendResumeLocked(conn);
                }
                foreach (var frame in _unacked)
                {
                    conn.Enqueue(frame.Json); // same id, original order: the server dedupes
                    frame.Attempts++;
                    _stats.FramesSent++;
                    if (frame.Attempts > 1) _stats.FramesResent++;
                }
                _live = true;
            }
            after.Add(() => { var h = Connected; if (h != null) h(welcome); });
            after.Add(() => _firstWelcome.TrySetResult(welcome));
        }

        void OnAck(Connection conn, AckEvent ack, List<Action> after)
        {
            PendingFrame done = null;
            AckResult result = null;
            lock (_gate)
            {
                if (ack.Id != null && ack.Id == _resumeId)
                {
                    // Acks are queued behind the replay on the same socket: the replay is complete.
                    _resumeId = null;
                    _seq.ResumeOutstanding = false;
                }
                else
                {
                    int index = _unacked.FindIndex(f => f.Id == ack.Id);
                    if (index >= 0)
                    {
                        done = _unacked[index];
                        _unacked.RemoveAt(index);
                        _stats.Acks++;
                        if (ack.Duplicate) _stats.DuplicateAcks++;
                        result = new AckResult { Id = ack.Id, Duplicate = ack.Duplicate, Attempts = done.Attempts };
                    }
                }
            }
            after.Add(() => { var h = Ack; if (h != null) h(ack); });
            if (done != null)
            {
                var callback = done.OnAck;
                if (callback != null) after.Add(() => callback(result));
                after.Add(() => done.TryAck(result));
            }
        }

        void OnPong(PongEvent pong, List<Action> after)
        {
            TaskCompletionSource<PongEvent> waiter = null;
            lock (_gate)
            {
                if (pong.T.HasValue && pong.Id != null && pong.Id.StartsWith("ping-", StringComparison.Ordinal))
                {
                    pong.RttMs = Math.Round(_clock.Elapsed.TotalMilliseconds - pong.T.Value, 3);
                    _stats.LastRttMs = pong.RttMs;
                }
                _stats.Pongs++;
                if (pong.Id != null && _pings.TryGetValue(pong.Id, out waiter)) _pings.Remove(pong.Id);
            }
            after.Add(() => { var h = Pong; if (h != null) h(pong); });
            if (waiter != null) after.Add(() => waiter.TrySetResult(pong));
        }

        void OnError(Connection conn, ErrorEvent error, List<Action> after)
        {
            PendingFrame rejected = null;
            lock (_gate)
            {
                if (error.Code == ErrorCodes.RateLimited || error.Code == ErrorCodes.Unavailable)
                {
                    // Not applied; "send it again later with the same id". With an id, retry that
                    // frame (or the resume); without one (the per-connection rate limit does not
                    // say which frame it refused), retry everything unacknowledged: the server
                    // drops the ids it already has.
                    RetryLater(conn, error.Id);
                }
                else if (error.Id != null)
                {
                    int index = _unacked.FindIndex(f => f.Id == error.Id);
                    if (index >= 0)
                    {
                        rejected = _unacked[index];
                        _unacked.RemoveAt(index);
                        _awaitingReply.Remove(rejected.Id);
                    }
                }
            }
            after.Add(() => { var h = Error; if (h != null) h(error); });
            if (rejected != null)
            {
                var failure = new SamvadFrameRejectedException(error);
                after.Add(() => rejected.Fail(failure));
            }
        }

        void RetryLater(Connection conn, string id)
        {
            Task.Delay(_options.RateLimitedRetryDelay).ContinueWith(_ =>
            {
                lock (_gate)
                {
                    if (_current != conn || !_live) return; // a reconnect re-sends everything anyway
                    if (id != null && id == _resumeId)
                    {
                        SendResumeLocked(conn);
                        return;
                    }
                    foreach (var frame in _unacked)
                    {
                        if (id != null && frame.Id != id) continue;
                        conn.Enqueue(frame.Json);
                        frame.Attempts++;
                        _stats.FramesSent++;
                        _stats.FramesResent++;
                    }
                }
            }, TaskScheduler.Default);
        }

        void OnSequenced(Connection conn, SequencedEvent ev, List<Action> after)
        {
            PendingFrame answered = null;
            lock (_gate)
            {
                if (_current != conn || !_seq.Started) return;
                SeqDecision decision = _seq.Offer(ev.Type, ev.Seq);
                switch (decision)
                {
                    case SeqDecision.DropStale:
                        _stats.StaleEventsDropped++;
                        return;
                    case SeqDecision.DropGap:
                        _stats.GapEventsDropped++;
                        return;
                    case SeqDecision.DropGapAndResume:
                        _stats.GapEventsDropped++;
                        LogLine(string.Format("gap: got seq {0} after {1}; resuming", ev.Seq, _seq.LastSeq));
                        SendResumeLocked(conn);
                        return;
                }
                _stats.EventsApplied++;
                Fold(ev);
                var answer = ev as IAnswer;
                if (answer != null && answer.InReplyTo != null && _awaitingReply.TryGetValue(answer.InReplyTo, out answered))
                {
                    _awaitingReply.Remove(answer.InReplyTo);
                }
            }
            switch (ev.Type)
            {
                case "reply":
                    var reply = (ReplyEvent)ev;
                    after.Add(() => { var h = Reply; if (h != null) h(reply); });
                    if (reply.Mark == Marks.Nudge) after.Add(() => { var h = NudgeReceived; if (h != null) h(reply); });
                    if (reply.Mark == Marks.WelcomeBack) after.Add(() => { var h = WelcomedBack; if (h != null) h(reply); });
                    if (answered != null) after.Add(() => answered.TryReply(reply));
                    break;
                case "mood":
                    var mood = (MoodEvent)ev;
                    after.Add(() => { var h = Mood; if (h != null) h(mood); });
                    break;
                case "stage":
                    var stage = (StageEvent)ev;
                    after.Add(() => { var h = Stage; if (h != null) h(stage); });
                    break;
                case "session.ended":
                    var ended = (SessionEndedEvent)ev;
                    after.Add(() => { var h = SessionEnded; if (h != null) h(ended); });
                    break;
                case "snapshot":
                    var snapshot = (SnapshotEvent)ev;
                    after.Add(() => { var h = Snapshot; if (h != null) h(snapshot); });
                    break;
                case "tips":
                    var tips = (TipsEvent)ev;
                    after.Add(() => { var h = Tips; if (h != null) h(tips); });
                    break;
                case "session.report":
                    var report = (SessionReportEvent)ev;
                    after.Add(() => { var h = Report; if (h != null) h(report); });
                    break;
                case "repeat":
                    var repeated = (RepeatEvent)ev;
                    after.Add(() => { var h = Repeated; if (h != null) h(repeated); });
                    break;
                case "hint":
                    var hint = (HintEvent)ev;
                    after.Add(() => { var h = HintReceived; if (h != null) h(hint); });
                    break;
                case "undo":
                    var undone = (UndoEvent)ev;
                    after.Add(() => { var h = Undone; if (h != null) h(undone); });
                    break;
                case "heard":
                    var heard = (HeardEvent)ev;
                    after.Add(() => { var h = Heard; if (h != null) h(heard); });
                    break;
                case "speech":
                    var speech = (SpeechEvent)ev;
                    after.Add(() => { var h = SpeechHeard; if (h != null) h(speech); });
                    break;
                case "speech.partial":
                    var partialSpeech = (SpeechPartialEvent)ev;
                    after.Add(() => { var h = SpeechPartial; if (h != null) h(partialSpeech); });
                    break;
            }
            if (answered != null && !(ev is ReplyEvent))
            {
                after.Add(() => answered.TryAnswer(ev));
            }
        }

        /// <summary>Fold an applied event into the client's view of the session (under the lock).</summary>
        void Fold(SequencedEvent ev)
        {
            var snapshot = ev as SnapshotEvent;
            if (snapshot != null)
            {
                _stats.Snapshots++;
                if (snapshot.State != null) _state = snapshot.State;
                if (_state != null) _state.Seq = snapshot.Seq;
                return;
            }
            var undone = ev as UndoEvent;
            if (undone != null && undone.State != null)
            {
                // The session exactly as before the turn taken back: it replaces ours.
                _state = undone.State.Copy();
                _state.Seq = undone.Seq;
                return;
            }
            if (_state == null) return;
            _state = _state.Copy(); // copies handed out earlier stay as they were
            _state.Seq = ev.Seq;
            var reply = ev as ReplyEvent;
            if (reply != null)
            {
                _state.Turn = reply.Turn;
                _state.HappinessScore = reply.HappinessScore;
                _state.Stage = reply.NegotiationState;
                _state.VendorMood = reply.VendorMood;
                _state.IsTerminal = reply.IsTerminal;
                if (reply.CounterPrice.HasValue) _state.VendorQuote = reply.CounterPrice;
                if (reply.Item != null) _state.Item = reply.Item;
                if (reply.LearnerOffer.HasValue) _state.LastOffer = reply.LearnerOffer;
                return;
            }
            var mood = ev as MoodEvent;
            if (mood != null)
            {
                _state.HappinessScore = mood.HappinessScore;
                _state.VendorMood = mood.VendorMood;
                return;
            }
            var stage = ev as StageEvent;
            if (stage != null)
            {
                _state.Stage = stage.To;
                return;
            }
            var heard = ev as HeardEvent;
            if (heard != null)
            {
                if (heard.QuoteUnbound) _state.VendorQuote = heard.VendorQuote;
                return;
            }
            var tips = ev as TipsEvent;
            if (tips != null)
            {
                _latestTips = tips;
                return;
            }
            var reported = ev as SessionReportEvent;
            if (reported != null)
            {
                _report = reported.Report;
                return;
            }
            var ended = ev as SessionEndedEvent;
            if (ended != null)
            {
                _state.IsTerminal = true;
                _state.Outcome = ended.Outcome;
                _state.Summary = ended.Summary;
            }
        }
    }
}
