// A STAND-IN FOR TESTS, NEVER SHIPPED TO UNITY (see UnityEngine.cs): what a test uses besides the
// player loop (PlayerLoop.cs). Nothing in this namespace exists in Unity.
//   ConsoleWindow  every Debug line, from any thread
//   AudioThread    calls OnAudioFilterRead of scripts next to a playing AudioSource, in real time
//   Serialized     sets a component's serialized fields as the Inspector would
//   Hands          grabs and lets go of an XRGrabInteractable as XRI raises it
//   Inspect        what Unity shows in its windows but has no API for

using System;
using System.Collections.Generic;
using System.IO;
using System.Reflection;
using System.Threading;
using UnityEngine;
using UnityEngine.XR.Interaction.Toolkit;
using Object = UnityEngine.Object;

namespace UnityStandIn
{
    /// <summary>The Console window: every Debug line, from any thread.</summary>
    public static class ConsoleWindow
    {
        static readonly List<KeyValuePair<LogType, string>> Entries = new List<KeyValuePair<LogType, string>>();

        /// <summary>Where lines are echoed as they come (null: nowhere).</summary>
        public static TextWriter Echo { get; set; }

        internal static void Add(LogType type, object message)
        {
            string text = message == null ? "Null" : message.ToString();
            lock (Entries) Entries.Add(new KeyValuePair<LogType, string>(type, text));
            var echo = Echo;
            if (echo != null) echo.WriteLine("[unity " + type + "] " + text);
        }

        public static void Clear()
        {
            lock (Entries) Entries.Clear();
        }

        /// <summary>Errors and exceptions logged so far.</summary>
        public static string[] Errors
        {
            get
            {
                var errors = new List<string>();
                lock (Entries)
                {
                    foreach (var e in Entries) if (e.Key == LogType.Error || e.Key == LogType.Exception) errors.Add(e.Value);
                }
                return errors.ToArray();
            }
        }
    }

    /// <summary>Unity's audio thread: every buffer of the output, the filters of each playing source.</summary>
    public static class AudioThread
    {
        static Thread _thread;
        static volatile bool _running;

        public static void Start(int outputRate = 48000, int bufferFrames = 1024, int channels = 2)
        {
            if (_thread != null) throw new InvalidOperationException("the audio thread is already running");
            AudioSettings.OutputRate = outputRate;
            _running = true;
            _thread = new Thread(() => Loop(outputRate, bufferFrames, channels)) { IsBackground = true, Name = "Audio" };
            _thread.Start();
        }

        public static void Stop()
        {
            _running = false;
            if (_thread != null) _thread.Join();
            _thread = null;
        }

        /// <summary>What the source has played so far.</summary>
        public static OutputMeter Meter(AudioSource source) { return source.Meter; }

        static void Loop(int rate, int frames, int channels)
        {
            var buffer = new float[frames * channels];
            var args = new object[] { buffer, channels };
            double started = PlayerLoop.RealSeconds();
            for (long n = 1; _running; n++)
            {
                foreach (var pair in PlayerLoop.AudibleSources())
                {
                    Array.Clear(buffer, 0, buffer.Length);  // the source has no clip: its own output is silence
                    foreach (var filter in pair.Value)
                    {
                        try
                        {
                            PlayerLoop.Find(filter.GetType(), "OnAudioFilterRead", new[] { typeof(float[]), typeof(int) })
                                      .Invoke(filter, args);
                        }
                        catch (TargetInvocationException ex)
                        {
                            Debug.LogException(ex.InnerException);
                        }
                    }
                    pair.Key.Meter.Add(buffer, channels);
                }
                // Real time: buffer n is due n buffers after the start.
                double wait = started + (double)n * frames / rate - PlayerLoop.RealSeconds();
                if (wait > 0) Thread.Sleep(TimeSpan.FromSeconds(wait));
            }
        }
    }

    /// <summary>Sets and reads the fields Unity serializes (public, or [SerializeField]), as the
    /// Inspector and a loaded scene do; any other field is refused.</summary>
    public static class Serialized
    {
        public static void Set(Object target, string field, object value) { Field(target, field).SetValue(target, value); }

        public static T Get<T>(Object target, string field) { return (T)Field(target, field).GetValue(target); }

        static FieldInfo Field(Object target, string name)
        {
            for (var t = target.GetType(); t != null; t = t.BaseType)
            {
                var f = t.GetField(name, BindingFlags.Instance | BindingFlags.Public | BindingFlags.NonPublic | BindingFlags.DeclaredOnly);
                if (f == null) continue;
                if (f.IsInitOnly || f.IsNotSerialized || !(f.IsPublic || f.IsDefined(typeof(SerializeField), true)))
                {
                    throw new ArgumentException(t.Name + "." + name + " is not a serialized field");
                }
                return f;
            }
            throw new ArgumentException(target.GetType().Name + " has no field " + name);
        }
    }

    /// <summary>A hand grabbing and letting go, as the XR Interaction Toolkit raises it.</summary>
    public static class Hands
    {
        public static void Grab(XRGrabInteractable interactable)
        {
            interactable.selectEntered.Invoke(new SelectEnterEventArgs { interactableObject = interactable });
        }

        public static void Release(XRGrabInteractable interactable)
        {
            interactable.selectExited.Invoke(new SelectExitEventArgs { interactableObject = interactable });
        }
    }

    /// <summary>What Unity shows in its windows but has no API for.</summary>
    public static class Inspect
    {
        public static int Triggers(Animator animator, string name)
        {
            int count;
            return animator.Triggers.TryGetValue(name, out count) ? count : 0;
        }
    }
}
