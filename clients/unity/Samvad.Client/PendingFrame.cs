using System;
using System.Threading.Tasks;

namespace Samvad.Client
{
    /// <summary>
    /// A frame the client is responsible for until the server acknowledges it (`scene`,
    /// `transcript`, `command`, `playback`, `silence`). The client re-sends it, with the same id,
    /// after every reconnect until then.
    /// </summary>
    public sealed class PendingFrame
    {
        readonly TaskCompletionSource<AckResult> _ack =
            new TaskCompletionSource<AckResult>(TaskCreationOptions.RunContinuationsAsynchronously);
        readonly TaskCompletionSource<ReplyEvent> _reply;
        readonly TaskCompletionSource<SequencedEvent> _answer;

        /// <param name="answered">True when the server answers the frame with an event whose
        /// in_reply_to is its id (hint, repeat and undo commands, playback).</param>
        internal PendingFrame(string id, string type, string json, Action<AckResult> onAck, bool answered = false)
        {
            Id = id;
            Type = type;
            Json = json;
            OnAck = onAck;
            if (type == "transcript" || type == "audio")  // an utterance is a turn too
            {
                _reply = new TaskCompletionSource<ReplyEvent>(TaskCreationOptions.RunContinuationsAsynchronously);
            }
            else if (answered)
            {
                _answer = new TaskCompletionSource<SequencedEvent>(TaskCreationOptions.RunContinuationsAsynchronously);
            }
        }

        /// <summary>The client-chosen id: the server's idempotency key.</summary>
        public string Id { get; private set; }

        /// <summary>"scene", "transcript", "command", "playback" or "silence".</summary>
        public string Type { get; private set; }

        /// <summary>Completes when the server acknowledges the frame (possibly as a duplicate);
        /// faults when the server rejects it or the client stops for good.</summary>
        public Task<AckResult> Acked { get { return _ack.Task; } }

        /// <summary>For transcripts: completes with the applied `reply` whose in_reply_to is this id
        /// (the reply may come before the ack). Null for scene frames.</summary>
        public Task<ReplyEvent> Reply { get { return _reply == null ? null : _reply.Task; } }

        /// <summary>For Hint(), Repeat(), Undo() and ReportPlayback(): completes with the applied event
        /// that answers this frame (a <see cref="HintEvent"/>, <see cref="RepeatEvent"/>,
        /// <see cref="UndoEvent"/> or <see cref="HeardEvent"/>), faults like <see cref="Acked"/> when
        /// the frame is refused. Null for the other frames: Stop() is answered by SessionEnded and
        /// Report, Silence() by a reply marked nudge (NudgeReceived).</summary>
        public Task<SequencedEvent> Answer { get { return _answer == null ? null : _answer.Task; } }

        /// <summary>True when the client waits for an event that answers this frame.</summary>
        internal bool ExpectsAnswer { get { return _reply != null || _answer != null; } }

        internal string Json { get; private set; }
        internal Action<AckResult> OnAck { get; private set; }
        internal int Attempts { get; set; }

        internal bool TryAck(AckResult result)
        {
            return _ack.TrySetResult(result);
        }

        internal void TryReply(ReplyEvent reply)
        {
            if (_reply != null)
            {
                _reply.TrySetResult(reply);
            }
        }

        internal void TryAnswer(SequencedEvent answer)
        {
            if (_answer != null)
            {
                _answer.TrySetResult(answer);
            }
        }

        internal void Fail(Exception error)
        {
            FailReply(error); // first, so that whoever awaits Acked finds Reply and Answer settled
            _ack.TrySetException(error);
        }

        internal void FailReply(Exception error)
        {
            if (_reply != null)
            {
                _reply.TrySetException(error);
            }
            if (_answer != null)
            {
                _answer.TrySetException(error);
            }
        }
    }

    /// <summary>The server refused a frame for good (invalid, too_large, forbidden, session_ended, ...).</summary>
    public sealed class SamvadFrameRejectedException : Exception
    {
        public SamvadFrameRejectedException(ErrorEvent error)
            : base(string.Format("frame {0} rejected: {1}: {2}", error.Id, error.Code, error.Message))
        {
            Error = error;
        }

        public ErrorEvent Error { get; private set; }
    }

    /// <summary>The client stopped for good: a close code that forbids reconnecting, too many failed
    /// attempts, or Close/Dispose.</summary>
    public sealed class SamvadClosedException : Exception
    {
        public SamvadClosedException(string message, int? closeCode = null) : base(message)
        {
            CloseCode = closeCode;
        }

        public int? CloseCode { get; private set; }
    }
}
