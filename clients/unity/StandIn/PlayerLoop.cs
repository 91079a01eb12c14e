// A STAND-IN FOR TESTS, NEVER SHIPPED TO UNITY (see UnityEngine.cs): the player loop and the hooks a
// test uses to drive components. Nothing in this namespace exists in Unity.
//   PlayerLoop.Install()   makes the calling thread Unity's main thread, with a SynchronizationContext
//                          that runs posted work once a frame (as UnitySynchronizationContext does)
//   PlayerLoop.Frame()     one frame: Start for new scripts, Update, the posted work, LateUpdate,
//                          then the objects destroyed during the frame (OnDisable, OnDestroy)
// Hooks.cs has the rest a test uses (the audio thread, the Inspector, the hands, the console).
// Awake and OnEnable run inside AddComponent on an active GameObject, or when it becomes active.

using System;
using System.Collections.Concurrent;
using System.Collections.Generic;
using Stopwatch = System.Diagnostics.Stopwatch;
using System.Reflection;
using System.Threading;
using UnityEngine;
using Object = UnityEngine.Object;

namespace UnityStandIn
{
    public static class PlayerLoop
    {
        const BindingFlags AnyInstance = BindingFlags.Instance | BindingFlags.Public | BindingFlags.NonPublic | BindingFlags.DeclaredOnly;
        static readonly Stopwatch Clock = Stopwatch.StartNew();
        static readonly List<GameObject> Objects = new List<GameObject>();
        static readonly List<Object> ToDestroy = new List<Object>();
        static readonly List<string> ViolationList = new List<string>();
        static readonly ConcurrentDictionary<string, MethodInfo> Messages = new ConcurrentDictionary<string, MethodInfo>();
        static int _mainThread = -1;
        static MainThreadContext _context;

        /// <summary>Guards the scene's object lists, which the audio thread reads.</summary>
        internal static readonly object SceneGate = new object();

        /// <summary>The calling thread becomes the main thread. With <paramref name="unityContext"/>, it
        /// gets a SynchronizationContext drained once a frame, as in Unity; without, none (a host
        /// without Unity's context).</summary>
        public static void Install(bool unityContext = true)
        {
            _mainThread = Thread.CurrentThread.ManagedThreadId;
            _context = unityContext ? new MainThreadContext() : null;
            SynchronizationContext.SetSynchronizationContext(_context);
            Time.Now = (float)RealSeconds();
        }

        public static bool IsMainThread { get { return Thread.CurrentThread.ManagedThreadId == _mainThread; } }

        /// <summary>Unity API called off the main thread ("get_time from thread 7").</summary>
        public static string[] Violations { get { lock (ViolationList) return ViolationList.ToArray(); } }

        public static double RealSeconds() { return Clock.Elapsed.TotalSeconds; }

        internal static void RequireMainThread(string api)
        {
            if (_mainThread < 0 || IsMainThread) return;
            lock (ViolationList) ViolationList.Add(api + " from thread " + Thread.CurrentThread.ManagedThreadId);
            throw new UnityException(api + " can only be called from the main thread.");
        }

        // ------------------------------------------------------------------ frames

        public static void Frame()
        {
            RequireMainThread("PlayerLoop.Frame");
            Time.Now = (float)RealSeconds();
            foreach (var script in Scripts())
            {
                if (script.Awoken && !script.Started && script.isActiveAndEnabled)
                {
                    script.Started = true;
                    Send(script, "Start");
                }
            }
            foreach (var script in Scripts()) if (script.Started && script.isActiveAndEnabled) Send(script, "Update");
            if (_context != null) _context.Exec();
            foreach (var script in Scripts()) if (script.Started && script.isActiveAndEnabled) Send(script, "LateUpdate");
            Object[] doomed;
            lock (ToDestroy)
            {
                doomed = ToDestroy.ToArray();
                ToDestroy.Clear();
            }
            foreach (var obj in doomed) DestroyNow(obj);
        }

        /// <summary>Frames at about 60 per second until <paramref name="done"/> holds; throws a
        /// TimeoutException naming <paramref name="what"/> after <paramref name="limit"/>.</summary>
        public static void RunUntil(Func<bool> done, TimeSpan limit, string what)
        {
            var deadline = RealSeconds() + limit.TotalSeconds;
            while (!done())
            {
                if (RealSeconds() > deadline) throw new TimeoutException(what + " took longer than " + limit.TotalSeconds + " s");
                Frame();
                Thread.Sleep(16);
            }
        }

        public static void RunFrames(int count)
        {
            for (int i = 0; i < count; i++)
            {
                Frame();
                Thread.Sleep(16);
            }
        }

        static List<MonoBehaviour> Scripts()
        {
            var scripts = new List<MonoBehaviour>();
            lock (SceneGate)
            {
                foreach (var go in Objects)
                {
                    foreach (var c in go.Components)
                    {
                        var script = c as MonoBehaviour;
                        if (script != null && !script.Destroyed) scripts.Add(script);
                    }
                }
            }
            return scripts;
        }

        /// <summary>Calls a message (Awake, Update, ...) the way Unity does: by name, whatever its
        /// visibility, without arguments; an exception is logged and the loop goes on.</summary>
        static void Send(MonoBehaviour script, string message)
        {
            var method = Find(script.GetType(), message, Type.EmptyTypes);
            if (method == null) return;
            try
            {
                method.Invoke(script, null);
            }
            catch (TargetInvocationException ex)
            {
                Debug.LogException(ex.InnerException);
            }
        }

        internal static MethodInfo Find(Type type, string name, Type[] parameters)
        {
            string key = type.AssemblyQualifiedName + "::" + name + "/" + parameters.Length;
            return Messages.GetOrAdd(key, _ =>
            {
                for (var t = type; t != null && t != typeof(MonoBehaviour); t = t.BaseType)
                {
                    var found = t.GetMethod(name, AnyInstance, null, parameters, null);
                    if (found != null) return found;
                }
                return null;
            });
        }

        // ------------------------------------------------------------------ objects

        internal static void Register(GameObject go)
        {
            lock (SceneGate) Objects.Add(go);
        }

        internal static Component AddComponent(GameObject go, Type type)
        {
            if (!typeof(Component).IsAssignableFrom(type) || type.IsAbstract || type == typeof(Transform))
            {
                Debug.LogError("AddComponent: cannot add a " + type.Name);
                return null;
            }
            if (type.IsDefined(typeof(DisallowMultipleComponent), false) && go.GetComponent(type) != null)
            {
                Debug.LogError("Can't add component '" + type.Name + "' to " + go.name
                               + " because such a component is already added to the game object!");
                return null;
            }
            foreach (RequireComponent required in type.GetCustomAttributes(typeof(RequireComponent), true))
            {
                foreach (var t in new[] { required.m_Type0, required.m_Type1, required.m_Type2 })
                {
                    if (t != null && go.GetComponent(t) == null) AddComponent(go, t);
                }
            }
            var component = (Component)Activator.CreateInstance(type, true);
            component.Owner = go;
            lock (SceneGate) go.Components.Add(component);
            var script = component as MonoBehaviour;
            if (script != null) Sync(script);
            return component;
        }

        internal static void ActivationChanged(GameObject go, bool wasActive)
        {
            var scripts = new List<MonoBehaviour>();
            Collect(go, scripts);
            foreach (var script in scripts) Sync(script);
        }

        internal static void EnabledChanged(Behaviour behaviour)
        {
            var script = behaviour as MonoBehaviour;
            if (script != null) Sync(script);
        }

        static void Collect(GameObject go, List<MonoBehaviour> into)
        {
            foreach (var c in go.Components.ToArray())
            {
                var script = c as MonoBehaviour;
                if (script != null && !script.Destroyed) into.Add(script);
            }
            foreach (var child in go.transform.Children.ToArray()) Collect(child.Owner, into);
        }

        // Brings a script's messages up to date: Awake once it is active, then OnEnable or OnDisable.
        static void Sync(MonoBehaviour script)
        {
            bool active = script.Owner.ActiveInHierarchy && !script.Destroyed;
            if (active && !script.Awoken)
            {
                script.Awoken = true;
                Send(script, "Awake");
            }
            bool enabled = active && script.EnabledSelf && !script.Destroyed;
            if (enabled && !script.EnableSent)
            {
                script.EnableSent = true;
                Send(script, "OnEnable");
            }
            else if (!enabled && script.EnableSent)
            {
                script.EnableSent = false;
                Send(script, "OnDisable");
            }
        }

        internal static void DestroyAtEndOfFrame(Object obj)
        {
            lock (ToDestroy) if (!ReferenceEquals(obj, null)) ToDestroy.Add(obj);
        }

        internal static void DestroyNow(Object obj)
        {
            if (ReferenceEquals(obj, null) || obj.Destroyed) return;
            var go = obj as GameObject;
            var scripts = new List<MonoBehaviour>();
            if (go != null) Collect(go, scripts);
            else if (obj is MonoBehaviour) scripts.Add((MonoBehaviour)obj);
            foreach (var script in scripts)
            {
                if (!script.EnableSent) continue;
                script.EnableSent = false;
                Send(script, "OnDisable");
            }
            foreach (var script in scripts) if (script.Awoken) Send(script, "OnDestroy");
            lock (SceneGate)
            {
                if (go != null) MarkDestroyed(go);
                else
                {
                    var component = (Component)obj;
                    component.Destroyed = true;
                    component.Owner.Components.Remove(component);
                    var source = component as AudioSource;
                    if (source != null) source.Playing = false;
                }
            }
        }

        static void MarkDestroyed(GameObject go)
        {
            foreach (var child in go.transform.Children.ToArray()) MarkDestroyed(child.Owner);
            foreach (var c in go.Components)
            {
                c.Destroyed = true;
                var source = c as AudioSource;
                if (source != null) source.Playing = false;
            }
            go.Destroyed = true;
            if (go.transform.Parent != null) go.transform.Parent.Children.Remove(go.transform);
            Objects.Remove(go);
        }

        /// <summary>The playing sources and, for each, the scripts with OnAudioFilterRead beside it.</summary>
        internal static List<KeyValuePair<AudioSource, MonoBehaviour[]>> AudibleSources()
        {
            var found = new List<KeyValuePair<AudioSource, MonoBehaviour[]>>();
            var filterArgs = new[] { typeof(float[]), typeof(int) };
            lock (SceneGate)
            {
                foreach (var go in Objects)
                {
                    if (!go.ActiveInHierarchy) continue;
                    AudioSource source = null;
                    var filters = new List<MonoBehaviour>();
                    foreach (var c in go.Components)
                    {
                        var s = c as AudioSource;
                        if (s != null && s.EnabledSelf && s.Playing) source = s;
                        var script = c as MonoBehaviour;
                        if (script != null && script.EnableSent && Find(script.GetType(), "OnAudioFilterRead", filterArgs) != null)
                        {
                            filters.Add(script);
                        }
                    }
                    if (source != null) found.Add(new KeyValuePair<AudioSource, MonoBehaviour[]>(source, filters.ToArray()));
                }
            }
            return found;
        }
    }

    /// <summary>Posted work waits for the next frame and runs on the main thread, like Unity's
    /// UnitySynchronizationContext (whose queue the player loop drains after Update).</summary>
    sealed class MainThreadContext : SynchronizationContext
    {
        readonly ConcurrentQueue<KeyValuePair<SendOrPostCallback, object>> _queue =
            new ConcurrentQueue<KeyValuePair<SendOrPostCallback, object>>();

        public override void Post(SendOrPostCallback d, object state)
        {
            _queue.Enqueue(new KeyValuePair<SendOrPostCallback, object>(d, state));
        }

        public override void Send(SendOrPostCallback d, object state)
        {
            if (PlayerLoop.IsMainThread)
            {
                d(state);
                return;
            }
            using (var done = new ManualResetEventSlim())
            {
                Post(s => { try { d(s); } finally { done.Set(); } }, state);
                done.Wait();
            }
        }

        public override SynchronizationContext CreateCopy() { return this; }

        internal void Exec()
        {
            // Only what was queued before this frame's turn: work posted meanwhile waits a frame.
            int count = _queue.Count;
            KeyValuePair<SendOrPostCallback, object> work;
            while (count-- > 0 && _queue.TryDequeue(out work))
            {
                try
                {
                    work.Key(work.Value);
                }
                catch (Exception ex)
                {
                    Debug.LogException(ex);  // e.g. from an async void method, as Unity logs it
                }
            }
        }
    }
}
