using System;
using System.Threading.Tasks;

namespace Samvad.Client
{
    /// <summary>
    /// A `scene` or `transcript` frame the client is responsible for until the server acknowledges
    /// it. The client re-sends it, with the same id, after every reconnect until then.
    /// </summary>
    public sealed class PendingFrame
    {
        readonly TaskCompletionSource<AckResult> _ack =
            new TaskCompletionSource<AckResult>(TaskCreationOptions.RunContinuationsAsynchronously);
        readonly TaskCompletionSource<ReplyEvent> _reply;

        internal PendingFrame(string id, string type, string json, Action<AckResult> onAck)
        {
            Id = id;
            Type = type;
            Json = json;
            OnAck = onAck;
            if (type == "transcript")
            {
                _reply = new TaskCompletionSource<ReplyEvent>(TaskCreationOptions.RunContinuationsAsynchronously);
            }
        }

        /// <summary>The client-chosen id: the server's idempotency key.</summary>
        public string Id { get; private set; }

        /// <summary>"scene" or "transcript".</summary>
        public string Type { get; private set; }

        /// <summary>Completes when the server acknowledges the frame (possibly as a duplicate);
        /// faults when the server rejects it or the client stops for good.</summary>
        public Task<AckResult> Acked { get { return _ack.Task; } }

        /// <summary>For transcripts: completes with the applied `reply` whose in_reply_to is this id
        /// (the reply may come before the ack). Null for scene frames.</summary>
        public Task<ReplyEvent> Reply { get { return _reply == null ? null : _reply.Task; } }

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

        internal void Fail(Exception error)
        {
            _ack.TrySetException(error);
            if (_reply != null)
            {
                _reply.TrySetException(error);
            }
        }

        internal void FailReply(Exception error)
        {
            if (_reply != null)
            {
                _reply.TrySetException(error);
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
